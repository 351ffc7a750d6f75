//! `serve --http` for a team: the built binary over an embedded store, with bearer tokens from a
//! token file, the allowed origins and the bind-address rule. Every tool, the resources and a
//! batch are refused without a valid token before any MCP processing; a read-only token cannot
//! change the index; no token ever shows in a log line or on stderr.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{McpHttp, Server, index, is_error, testdata_dir, tool_text};
use serde_json::{Value, json};

const ADMIN: &str = "admin-token-5f1c2a9e7b3d";
const READER: &str = "reader-token-8e4d6b2a1c9f";

/// A store of the test corpus (indexed once per test) and a token file with one admin and one
/// read-only token.
fn store_and_tokens() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    index(&testdata_dir().join("corpus"), &store, &[]);
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# the team's tokens\n{ADMIN} admin  # ops\n{READER} read-only\n")).unwrap();
    (dir, tokens)
}

async fn serve(dir: &Path, tokens: &Path, extra: &[&str]) -> McpHttp {
    let store = dir.join("store");
    Server::new()
        .args(["serve", "--store", store.to_str().unwrap(), "--token-file", tokens.to_str().unwrap()])
        .args(extra.iter().copied())
        .http()
        .await
}

/// POSTs `body` to `/mcp` with the MCP headers and `extra` headers.
async fn post(h: &McpHttp, body: &str, extra: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(h.url())
        .timeout(Duration::from_secs(60))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_owned());
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("POST /mcp");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn request(id: i64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

#[tokio::test]
async fn every_tool_resource_and_batch_needs_a_valid_token() {
    let (dir, tokens) = store_and_tokens();
    let h = serve(dir.path(), &tokens, &[]).await;

    // With the admin token: the tools and resources there are to walk.
    let admin = h.client_with_bearer(ADMIN).await;
    let tools = admin.list_tools().await;
    let names: Vec<String> =
        tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
    assert!(names.contains(&"search".to_owned()) && names.contains(&"add_repository".to_owned()), "{names:?}");
    let auth = bearer(ADMIN);
    let (status, _, body) = post(&h, &request(1, "resources/list", json!({})), &[("Authorization", &auth)]).await;
    assert_eq!(status, 200, "{body}");
    let resources: Value = serde_json::from_str(&body).unwrap();
    let uri = resources["result"]["resources"][0]["uri"].as_str().unwrap_or("repo://acme/widgets").to_owned();

    let mut requests: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, name)| request(i as i64 + 10, "tools/call", json!({"name": name, "arguments": {"query": "x"}})))
        .collect();
    requests.extend([
        request(1, "initialize", support::initialize_params()),
        request(2, "ping", json!({})),
        request(3, "tools/list", json!({})),
        request(4, "resources/list", json!({})),
        request(5, "resources/templates/list", json!({})),
        request(6, "resources/read", json!({"uri": uri})),
        request(7, "prompts/list", json!({})),
        format!("[{},{}]", request(8, "ping", json!({})), request(9, "tools/list", json!({}))),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        String::new(),
        "{not json".into(),
    ]);
    let wrong = [
        None,
        Some("Bearer not-a-token-of-this-server".to_owned()),
        Some(format!("Basic {ADMIN}")),
        Some(format!("Bearer {ADMIN}x")),
        Some(ADMIN.to_owned()),
    ];
    for body in &requests {
        for authorization in &wrong {
            let headers: Vec<(&str, &str)> = authorization.iter().map(|a| ("Authorization", a.as_str())).collect();
            let (status, headers, text) = post(&h, body, &headers).await;
            assert_eq!(status, 401, "{body} with {authorization:?}: {text}");
            let challenge = headers.get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("");
            assert!(challenge.starts_with("Bearer realm=\"repo-retriever\""), "{challenge}");
            assert_eq!(authorization.is_some(), challenge.contains("error=\"invalid_token\""), "{challenge}");
            assert!(!text.contains("jsonrpc"), "refused before MCP: {text}");
        }
    }
    // GET too.
    let (status, _) = h.raw(reqwest::Method::GET, "/mcp", None).await;
    assert_eq!(status, 401);

    // The read-only token searches and reads, but cannot add a repository.
    let reader = h.client_with_bearer(READER).await;
    let found = reader.call_tool("search", json!({"query": "widget client"})).await;
    assert!(!is_error(&found), "{found}");
    let refused = reader.call_tool("add_repository", json!({"url": "https://github.com/octo/demo"})).await;
    assert!(is_error(&refused), "{refused}");
    assert_eq!(
        tool_text(&refused),
        "\"add_repository\" changes the index: it needs an admin token, and this token is read-only"
    );
    // The admin token reaches add_repository's own checks.
    let checked = admin.call_tool("add_repository", json!({"url": "ftp://github.com/octo/demo"})).await;
    assert!(tool_text(&checked).contains("only https is supported"), "{checked}");

    // No token in any log line or on stderr.
    let logs = h.wait_logs(requests.len() * wrong.len()).await;
    assert!(logs.iter().any(|l| l["http"]["status_code"] == 401));
    let everything = format!("{}\n{}", h.stdout_lines().join("\n"), h.stderr());
    for token in [ADMIN, READER] {
        assert!(!everything.contains(token), "a token leaked:\n{everything}");
    }
}

#[tokio::test]
async fn a_foreign_origin_is_refused_even_with_a_token() {
    let (dir, tokens) = store_and_tokens();
    let h = serve(dir.path(), &tokens, &["--allow-origin", "https://ide.example.com"]).await;
    let auth = bearer(ADMIN);
    let ping = request(1, "ping", json!({}));
    for origin in ["http://evil.com", "null", "http://localhost.evil.com", "https://ide.example.com:8443"] {
        let (status, _, body) = post(&h, &ping, &[("Authorization", &auth), ("Origin", origin)]).await;
        assert_eq!((status, body.as_str()), (403, "Forbidden: this Origin is not allowed\n"), "{origin}");
        // Before the token: a foreign page learns nothing about tokens.
        let (status, _, _) = post(&h, &ping, &[("Origin", origin)]).await;
        assert_eq!(status, 403, "{origin}");
    }
    for origin in ["http://localhost:3000", "http://127.0.0.1", "https://IDE.example.com"] {
        let (status, _, body) = post(&h, &ping, &[("Authorization", &auth), ("Origin", origin)]).await;
        assert_eq!((status, serde_json::from_str::<Value>(&body).unwrap()["id"].clone()), (200, json!(1)), "{origin}");
    }
}

/// A browser page on an allowed origin can call the server: its preflight is answered (before the
/// token, which a browser does not send with it) and every answer names the origin, so the page
/// may read it; a foreign origin gets neither.
#[tokio::test]
async fn an_allowed_origin_gets_cors_answers() {
    let (dir, tokens) = store_and_tokens();
    let h = serve(dir.path(), &tokens, &["--allow-origin", "https://ide.example.com"]).await;
    let preflight = |origin: &str| {
        reqwest::Client::new()
            .request(reqwest::Method::OPTIONS, h.url())
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header("Access-Control-Request-Headers", "authorization, content-type, mcp-protocol-version")
            .send()
    };
    let header = |headers: &reqwest::header::HeaderMap, name: &str| {
        headers.get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default()
    };
    let answer = preflight("https://ide.example.com").await.unwrap();
    assert_eq!(answer.status().as_u16(), 204);
    let headers = answer.headers();
    assert_eq!(header(headers, "access-control-allow-origin"), "https://ide.example.com");
    assert!(header(headers, "access-control-allow-methods").contains("POST"));
    for wanted in ["authorization", "content-type", "mcp-protocol-version"] {
        assert!(header(headers, "access-control-allow-headers").contains(wanted), "{wanted}");
    }
    assert!(header(headers, "vary").contains("Origin"));

    let ping = request(1, "ping", json!({}));
    let auth = bearer(READER);
    let origin = ("Origin", "https://ide.example.com");
    let (status, headers, _) = post(&h, &ping, &[("Authorization", &auth), origin]).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "access-control-allow-origin"), "https://ide.example.com");
    // A refusal too, so that the page sees the 401 rather than a network error.
    let (status, headers, _) = post(&h, &ping, &[origin]).await;
    assert_eq!((status, header(&headers, "access-control-allow-origin").as_str()), (401, "https://ide.example.com"));

    let foreign = preflight("https://evil.example.com").await.unwrap();
    assert_eq!(foreign.status().as_u16(), 403);
    assert!(foreign.headers().get("access-control-allow-origin").is_none());
    let (status, headers, _) =
        post(&h, &ping, &[("Authorization", &auth), ("Origin", "https://evil.example.com")]).await;
    assert_eq!(status, 403);
    assert!(headers.get("access-control-allow-origin").is_none());

    // Without tokens (a loopback server) the preflight is answered too.
    let open = Server::new()
        .args([
            "serve",
            "--store",
            dir.path().join("store").to_str().unwrap(),
            "--allow-origin",
            "https://ide.example.com",
        ])
        .http()
        .await;
    let answer = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, open.url())
        .header("Origin", "https://ide.example.com")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 204);
}

/// `--http` on an address other than loopback: refused at start-up without tokens, unless
/// `--allow-unauthenticated`; served with tokens.
#[tokio::test]
async fn a_non_loopback_address_needs_tokens() {
    let (dir, _) = store_and_tokens();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let out = Server::new().args(["serve", "--store", store, "--http", "0.0.0.0:0"]).output().await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("Error: refusing to serve --http on 0.0.0.0:") && stderr.contains("--allow-unauthenticated"),
        "{stderr}"
    );
    // Served (still running after a while) with tokens, or with --allow-unauthenticated.
    for (extra, env) in [(&["--allow-unauthenticated"][..], None), (&[][..], Some(format!("{ADMIN} admin,{READER}")))] {
        let mut command = tokio::process::Command::new(support::server_bin());
        command.args(["serve", "--store", store, "--http", "0.0.0.0:0"]).args(extra).kill_on_drop(true);
        command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
        match &env {
            Some(tokens) => command.env("REPO_RETRIEVER_TOKENS", tokens),
            None => command.env_remove("REPO_RETRIEVER_TOKENS"),
        };
        let mut child = command.spawn().unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).await.unwrap();
            panic!("{extra:?}: the server exited ({status}): {stderr}");
        }
        child.kill().await.unwrap();
    }
    // A bad token list is refused at start-up, without showing the token.
    let out = Server::new()
        .args(["serve", "--store", store, "--http", "127.0.0.1:0"])
        .env("REPO_RETRIEVER_TOKENS", "short-secret admin")
        .output()
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr, "Error: REPO_RETRIEVER_TOKENS, line 1: a token must be at least 16 characters long\n");
}

/// A `/metrics` scrape, parsed as Prometheus parses it.
async fn scrape(base_url: &str, token: Option<&str>) -> prometheus_parse::Scrape {
    let mut request = reqwest::Client::new().get(format!("{base_url}/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The value of the counter or gauge `name` (a prefix: the parser may drop `_total`) whose labels
/// include `labels`; 0 when there is none yet.
fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric.starts_with(name) && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .find_map(|s| match &s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => Some(*v),
            prometheus_parse::Value::Untyped(v) if !s.metric.ends_with("_sum") => Some(*v),
            _ => None,
        })
        .unwrap_or(0.0)
}

/// Observations of the tool-call latency histogram of `tool` (its `+Inf` bucket).
fn observations(scrape: &prometheus_parse::Scrape, tool: &str) -> f64 {
    histogram_count(scrape, "repo_retriever_tool_call_duration_seconds", ("tool", tool))
}

/// Observations of the histogram `metric` with the label `key` = `value` (its `+Inf` bucket).
fn histogram_count(scrape: &prometheus_parse::Scrape, metric: &str, (key, value): (&str, &str)) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && s.labels.get(key) == Some(value))
        .find_map(|s| match &s.value {
            prometheus_parse::Value::Histogram(buckets) => buckets.iter().map(|b| b.count).reduce(f64::max),
            _ => None,
        })
        .unwrap_or(0.0)
}

#[tokio::test]
async fn health_readiness_and_metrics_that_move_with_the_calls() {
    let (dir, tokens) = store_and_tokens();
    let h = serve(dir.path(), &tokens, &[]).await;
    let base = h.base_url().to_owned();
    let get = |path: &str| reqwest::Client::new().get(format!("{base}{path}")).send();
    let healthz = get("/healthz").await.unwrap();
    assert_eq!((healthz.status().as_u16(), healthz.text().await.unwrap()), (200, "ok\n".to_owned()));
    let readyz = get("/readyz").await.unwrap();
    assert_eq!((readyz.status().as_u16(), readyz.text().await.unwrap()), (200, "ready\n".to_owned()));
    // The scrape needs a token, as /mcp does.
    let refused = get("/metrics").await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);

    let before = scrape(&base, Some(READER)).await;
    assert!(value(&before, "repo_retriever_store_chunks", &[]) > 0.0);
    assert!(value(&before, "repo_retriever_store_files", &[]) > 0.0);
    assert_eq!(value(&before, "repo_retriever_store_repositories", &[]), 1.0);

    let reader = h.client_with_bearer(READER).await;
    for _ in 0..2 {
        assert!(!is_error(&reader.call_tool("search", json!({"query": "widget client"})).await));
    }
    assert!(is_error(&reader.call_tool("search", json!({"query": "x", "limit": 99})).await));
    assert!(is_error(&reader.call_tool("add_repository", json!({"url": "https://github.com/octo/demo"})).await));
    assert!(!is_error(&reader.call_tool("list_repositories", json!({})).await));

    let after = scrape(&base, Some(ADMIN)).await;
    let moved = |name: &str, labels: &[(&str, &str)]| value(&after, name, labels) - value(&before, name, labels);
    assert_eq!(moved("repo_retriever_tool_calls", &[("tool", "search")]), 3.0);
    assert_eq!(moved("repo_retriever_tool_calls", &[("tool", "list_repositories")]), 1.0);
    assert_eq!(moved("repo_retriever_tool_errors", &[("tool", "search"), ("class", "invalid_arguments")]), 1.0);
    assert_eq!(moved("repo_retriever_tool_errors", &[("tool", "add_repository"), ("class", "forbidden")]), 1.0);
    assert_eq!(observations(&after, "search") - observations(&before, "search"), 3.0);
    // Each stage of the two searches that ran is timed.
    for stage in ["embed", "retrieve", "rerank", "code_rank", "select"] {
        let stage_count = |s| histogram_count(s, "repo_retriever_search_stage_duration_seconds", ("stage", stage));
        assert_eq!(stage_count(&after) - stage_count(&before), 2.0, "{stage}");
    }

    // The request log line names every tool call and its duration.
    let logs = h.wait_logs(1).await;
    let listed = logs.iter().find(|l| l["mcp"]["tool"] == "list_repositories").expect("a list_repositories line");
    assert_eq!(listed["mcp"]["outcome"], "success", "{listed}");
    assert!(listed["mcp"]["duration_ms"].as_f64().is_some(), "{listed}");
    let searched = logs.iter().find(|l| l["mcp"]["tool"] == "search").expect("a search line");
    assert!(searched["mcp"]["duration_ms"].as_f64().is_some() && searched["mcp"]["parameters"].is_object());
}

/// A stdio server with `--metrics`: the same endpoints on their own listener.
#[tokio::test]
async fn a_stdio_server_serves_metrics_on_its_own_address() {
    let (dir, _) = store_and_tokens();
    let store = dir.path().join("store");
    let addr = format!("127.0.0.1:{}", support::free_port());
    let mcp = Server::new().args(["serve", "--store", store.to_str().unwrap(), "--metrics", &addr]).stdio().await;
    let base = format!("http://{addr}");
    let result = mcp.call_tool("search", json!({"query": "widget client"})).await;
    assert!(!is_error(&result), "{result}");
    let scraped = scrape(&base, None).await;
    assert_eq!(value(&scraped, "repo_retriever_tool_calls", &[("tool", "search")]), 1.0);
    assert_eq!(observations(&scraped, "search"), 1.0);
    let readyz = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(readyz.status().as_u16(), 200);
    let mcp_path = reqwest::get(format!("{base}/mcp")).await.unwrap();
    assert_eq!(mcp_path.status().as_u16(), 404);
}

/// `--metrics` follows the rule of `--http`: another address than loopback is refused without
/// tokens unless `--allow-unauthenticated`, and with tokens a scrape needs one (the probes do not).
#[tokio::test]
async fn the_metrics_listener_follows_the_http_rules() {
    let (dir, tokens) = store_and_tokens();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let out = Server::new().args(["serve", "--store", store, "--metrics", "0.0.0.0:0"]).output().await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("Error: refusing to serve --metrics on 0.0.0.0:")
            && stderr.contains("--allow-unauthenticated"),
        "{stderr}"
    );

    let addr = format!("127.0.0.1:{}", support::free_port());
    let mcp = Server::new()
        .args(["serve", "--store", store, "--metrics", &addr, "--token-file", tokens.to_str().unwrap()])
        .stdio()
        .await;
    assert!(!is_error(&mcp.call_tool("search", json!({"query": "widget client"})).await));
    let base = format!("http://{addr}");
    let refused = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let wrong = reqwest::Client::new().get(format!("{base}/metrics")).bearer_auth("not-a-token-of-this-server");
    assert_eq!(wrong.send().await.unwrap().status().as_u16(), 401);
    let scraped = scrape(&base, Some(READER)).await;
    assert_eq!(value(&scraped, "repo_retriever_tool_calls", &[("tool", "search")]), 1.0);
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(reqwest::get(format!("{base}{probe}")).await.unwrap().status().as_u16(), 200, "{probe}");
    }
}

/// `/readyz` is open to anyone, so it is no way to load the backends: however many probes come,
/// Chroma and the embedding endpoint are asked once per interval (5 s) at most.
#[tokio::test]
async fn readiness_reaches_the_backends_once_per_interval() {
    let f = support::fixture();
    let h = Server::new()
        .args(["serve", "--tools", "search", "--chroma-url", &f.chroma_url, "--collection-name", &f.collection])
        .args(["--embedding-api-url", &f.embed_url, "--embedding-model", support::EMBED_MODEL])
        .http()
        .await;
    let started = std::time::Instant::now();
    let client = reqwest::Client::new();
    let probes: Vec<_> = (0..200)
        .map(|_| {
            let request = client.get(format!("{}/readyz", h.base_url()));
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                (response.status().as_u16(), response.text().await.unwrap())
            })
        })
        .collect();
    for probe in probes {
        assert_eq!(probe.await.unwrap(), (200, "ready\n".to_owned()));
    }
    let intervals = started.elapsed().as_secs() / 5 + 1;
    let scraped = scrape(h.base_url(), None).await;
    for operation in ["embedding request", "Chroma query"] {
        let requests = value(&scraped, "repo_retriever_backend_requests", &[("operation", operation)]);
        assert!(requests >= 1.0 && requests <= intervals as f64, "{operation}: {requests} in {intervals} interval(s)");
    }
}

/// A backend that never answers holds a search for the one deadline of `--search-timeout`, not for
/// the backends' time-out times their attempts.
#[tokio::test]
async fn a_search_has_one_deadline_whatever_the_backends_do() {
    // Accepts connections and never answers: a fault no real server shows on demand.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let f = support::fixture();
    let mcp = Server::new()
        .args(["serve", "--tools", "search", "--chroma-url", &f.chroma_url, "--collection-name", &f.collection])
        .args(["--embedding-api-url", &silent_url, "--embedding-model", support::EMBED_MODEL])
        .args(["--search-timeout", "1s"])
        .stdio()
        .await;
    let result = mcp.call_tool("search", json!({"query": "widget client"})).await;
    assert!(is_error(&result), "{result}");
    assert_eq!(tool_text(&result), "repository content search failed: the search did not finish within 1s");
    held.abort();

    let out = Server::new().args(["serve", "--search-timeout", "0s"]).output().await;
    assert_eq!(String::from_utf8_lossy(&out.stderr), "Error: --search-timeout must be more than 0\n");
}

/// `serve --chroma-url` over HTTP: every backend call counts, by operation, with its retries,
/// its failures by kind and its latency.
#[tokio::test]
async fn backend_calls_are_counted_by_operation() {
    let f = support::fixture();
    let serve = |embed_url: &str| {
        Server::new()
            .args(["serve", "--tools", "search", "--chroma-url", &f.chroma_url, "--collection-name", &f.collection])
            .args(["--embedding-api-url", embed_url, "--embedding-model", support::EMBED_MODEL])
            .env("CHROMA_REPO_SEARCH_RETRY_ATTEMPTS", "2")
    };
    let h = serve(&f.embed_url).http().await;
    let client = h.client().await;
    for _ in 0..2 {
        assert!(!is_error(&client.call_tool("search", json!({"query": "widget client"})).await));
    }
    let scraped = scrape(h.base_url(), None).await;
    let requests = |op: &str| value(&scraped, "repo_retriever_backend_requests", &[("operation", op)]);
    assert_eq!(requests("embedding request"), 2.0);
    assert_eq!(requests("Chroma query"), 2.0);
    let timed = scraped.samples.iter().any(|s| {
        s.metric == "repo_retriever_backend_request_duration_seconds"
            && s.labels.get("operation") == Some("Chroma query")
            && matches!(&s.value, prometheus_parse::Value::Histogram(b) if b.iter().any(|b| b.count == 2.0))
    });
    assert!(timed, "no latency histogram of the Chroma queries");
    // Ready: a one-result search went through Chroma and the embedding endpoint.
    let readyz = reqwest::get(format!("{}/readyz", h.base_url())).await.unwrap();
    assert_eq!((readyz.status().as_u16(), readyz.text().await.unwrap()), (200, "ready\n".to_owned()));

    // An embedding endpoint that does not answer: one retry, then a transport failure.
    let h = serve("http://127.0.0.1:9").http().await;
    let failed = h.client().await.call_tool("search", json!({"query": "widget client"})).await;
    assert!(is_error(&failed), "{failed}");
    let scraped = scrape(h.base_url(), None).await;
    let op = [("operation", "embedding request")];
    assert_eq!(value(&scraped, "repo_retriever_backend_requests", &op), 1.0);
    assert_eq!(value(&scraped, "repo_retriever_backend_retries", &op), 1.0);
    let errors = [("operation", "embedding request"), ("kind", "transport")];
    assert_eq!(value(&scraped, "repo_retriever_backend_errors", &errors), 1.0);
    assert_eq!(value(&scraped, "repo_retriever_tool_errors", &[("tool", "search"), ("class", "backend")]), 1.0);
    // Not ready, and the answer says which backend does not answer (and no URL).
    let readyz = reqwest::get(format!("{}/readyz", h.base_url())).await.unwrap();
    let (status, text) = (readyz.status().as_u16(), readyz.text().await.unwrap());
    assert_eq!(status, 503, "{text}");
    assert!(text.starts_with("not ready: ") && text.contains("embedding request"), "{text}");
    assert!(!text.contains("127.0.0.1"), "{text}");
}
