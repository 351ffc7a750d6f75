//! The server as a hostile client and hostile backends see it.
//!
//! - every argument cap, over stdio against the real binary (`serve` on the fixture corpus): each
//!   refusal names the argument and the cap and quotes at most a short prefix of the input; the
//!   argument just under each cap is not refused by the cap;
//! - the malformed-reply table: a Chroma, embedding or rerank reply of the wrong shape (mocks: a
//!   real Chroma does not send these), an oversized reply and a body that trickles forever, each a
//!   tool error naming the backend's operation, in the drop-in's and in `serve`'s wording;
//! - every call returns before its budget runs out, the server's resident memory after the suite
//!   is within 100 MB of its start, and no secret appears in a tool text or on stderr (`--debug`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::nav::{corpus, index};
use crate::support::{McpClient, Server, is_error, tool_text};
use rr_http::test_util::{FakeServer, Reply};
use serde_json::{Value, json};

/// What one call may take, with a generous margin: the caps exist so that no call comes near it.
const BUDGET: Duration = Duration::from_secs(60);
/// Resident memory the suite may add to a server.
const RSS_MARGIN_KB: u64 = 100 * 1024;

const BEARER: &str = "sekret-bearer-12c0de";
const EMBED_KEY: &str = "sekret-embed-12c0de";
const RERANK_KEY: &str = "sekret-rerank-12c0de";

fn proc_status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Cases tried, refused and allowed of one table.
#[derive(Debug, Default)]
struct Tally {
    tried: usize,
    refused: usize,
    allowed: usize,
}

impl Tally {
    fn print(&self, table: &str) {
        eprintln!("{table}: {} tried / {} refused / {} allowed", self.tried, self.refused, self.allowed);
    }
}

/// One `tools/call`, timed against [`BUDGET`].
async fn call(s: &McpClient, tool: &str, arguments: Value) -> Value {
    let started = Instant::now();
    let result = s.call_tool(tool, arguments).await;
    assert!(started.elapsed() < BUDGET, "{tool} returned after {:?}", started.elapsed());
    result
}

/// A refusal says what it refuses without echoing the input: short, and no long run of it.
fn assert_short(text: &str, input: &str) {
    assert!(text.len() < 700, "{} bytes of error: {}…", text.len(), &text[..200.min(text.len())]);
    if input.len() > 200 {
        let slice = &input[..200];
        assert!(!text.contains(slice), "the error quotes the input");
    }
}

const CAP_WORDS: [&str; 4] = ["too long", "at most", "too complex", "Invalid path_glob"];

#[tokio::test]
async fn every_argument_cap_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    index(&corpus(), dir.path(), "acme", "widgets", "main").await;
    let store = dir.path().to_str().unwrap().to_owned();
    let mut s = Server::new().args(["serve", "--store", &store]).timeout(BUDGET).stdio().await;
    let pid = s.pid().unwrap();
    let rss_start = proc_status_kb(pid, "VmRSS:");

    let big = |n: usize| "a".repeat(n);
    let mib4 = 4 << 20;
    let path_cap = rr_core::filter::MAX_PATH_COST;
    let wild = rr_core::filter::WILDCARD_COST;
    let repo = "acme/widgets";
    // (tool, arguments, the refusal, or None when the cap must let it through)
    let refused = |t: &str, d: &str| Some(format!("Invalid arguments for '{t}': {d}"));
    let table: Vec<(&str, Value, Option<String>)> = vec![
        ("search", json!({"query": big(mib4 + 1)}), Some("query is too long: at most 4194304 bytes".into())),
        ("search", json!({"query": big(100_000)}), None),
        (
            "search",
            json!({"query": "q", "source": format!("a/{}", big(mib4))}),
            Some("source is too long: at most 4194304 bytes".into()),
        ),
        ("search", json!({"query": "q", "source": format!("a/{}", big(100_000))}), None),
        (
            "search",
            json!({"query": "q", "path": big(path_cap + 1)}),
            Some(format!(
                "path is too complex: its pattern would exceed {path_cap} units (one per literal byte, {wild} per wildcard), past the regular-expression size limit of the store"
            )),
        ),
        (
            "search",
            json!({"query": "q", "path": "**/".repeat(path_cap / wild + 1)}),
            Some(format!(
                "path is too complex: its pattern would exceed {path_cap} units (one per literal byte, {wild} per wildcard), past the regular-expression size limit of the store"
            )),
        ),
        ("search", json!({"query": "q", "path": big(327_628)}), None),
        // Four million stars are one wildcard: the reference (and Chroma) accept them.
        ("search", json!({"query": "store", "path": "*".repeat(4_000_000)}), None),
        (
            "search",
            json!({"query": "q", "limit": big(1_000_000)}),
            Some(format!(
                "validating \"arguments\": validating root: validating /properties/limit: type: {}… has type \"string\", want \"integer\"",
                big(100)
            )),
        ),
        (
            "search",
            json!({"query": "q", big(1_000_000): 1}),
            Some(format!(
                "validating \"arguments\": validating root: unexpected additional properties [\"{}…\"]",
                big(100)
            )),
        ),
        (
            "search_code",
            json!({"query": big(513)}),
            refused("search_code", "query is too long; the limit is 512 bytes"),
        ),
        ("search_code", json!({"query": big(512)}), None),
        (
            "search_code",
            json!({"query": "x", "language": big(513)}),
            refused("search_code", "language must be at most 512 characters"),
        ),
        (
            "search_code",
            json!({"query": "x", "repository": big(2049)}),
            refused("search_code", "repository must be at most 2048 characters"),
        ),
        (
            "get_file",
            json!({"repository": big(2049), "path": "x"}),
            refused("get_file", "repository must be at most 2048 characters"),
        ),
        ("get_file", json!({"repository": big(2048), "path": "x"}), None),
        (
            "get_file",
            json!({"repository": repo, "path": big(4097)}),
            refused("get_file", "path must be at most 4096 characters"),
        ),
        ("get_file", json!({"repository": repo, "path": big(4096)}), None),
        (
            "list_definitions",
            json!({"repository": repo, "path_prefix": big(4097)}),
            refused("list_definitions", "path_prefix must be at most 4096 characters"),
        ),
        (
            "list_definitions",
            json!({"repository": repo, "name": big(513)}),
            refused("list_definitions", "name must be at most 512 characters"),
        ),
        ("list_definitions", json!({"repository": repo, "name": big(512)}), None),
        (
            "analyze_repository",
            json!({"repository": big(1_000_000)}),
            refused("analyze_repository", "repository must be at most 2048 characters"),
        ),
        (
            "find_patterns",
            json!({"repository": repo, "pattern": big(201)}),
            refused("find_patterns", "pattern must be at most 200 characters"),
        ),
        (
            "find_patterns",
            json!({"repository": repo, "pattern": "fn", "path_glob": "*".repeat(4_000_000)}),
            refused("find_patterns", "path_glob must be at most 1024 characters"),
        ),
        ("find_patterns", json!({"repository": repo, "pattern": "fn", "path_glob": "*".repeat(1024)}), None),
        ("find_patterns", json!({"repository": repo, "pattern": "fn", "path_glob": "[ab]?".repeat(204)}), None),
        (
            "find_patterns",
            json!({"repository": repo, "pattern": "(a|b)*c", "regex": true, "path_glob": "*".repeat(1024)}),
            None,
        ),
        (
            "add_repository",
            json!({"url": format!("https://github.com/{}", big(2048))}),
            refused("add_repository", "url must be at most 2048 characters"),
        ),
        (
            "add_repository",
            json!({"url": "https://github.com/a/b", "description": big(2001)}),
            refused("add_repository", "description must be at most 2000 characters"),
        ),
        (
            "get_file",
            json!({"repository": repo, "path": "x", big(1_000_000): 1}),
            refused(
                "get_file",
                &format!("unexpected argument '{}…' (additional properties are not allowed)", big(100)),
            ),
        ),
    ];
    let mut tally = Tally::default();
    for (tool, args, expected) in table {
        tally.tried += 1;
        let input = args.to_string();
        let result = call(&s, tool, args).await;
        let text = tool_text(&result).to_owned();
        match expected {
            Some(expected) => {
                tally.refused += 1;
                assert!(is_error(&result), "{tool}: {text}");
                assert_eq!(text, expected, "{tool}");
                assert_short(&text, &input);
            }
            None => {
                tally.allowed += 1;
                assert!(
                    !CAP_WORDS.iter().any(|w| text.contains(w)),
                    "{tool} refused by a cap: {}",
                    &text[..300.min(text.len())]
                );
                if is_error(&result) {
                    // Another refusal (a repository or file not found): it too quotes only a prefix.
                    assert_short(&text, &input);
                }
            }
        }
    }
    // A resource URI over the cap: a JSON-RPC error that does not quote it.
    tally.tried += 1;
    tally.refused += 1;
    let uri = format!("repo-retriever://repositories/{}", big(1_000_000));
    let answer = s.request_frame("resources/read", json!({"uri": uri})).await;
    assert_eq!(
        answer["error"]["message"],
        "Resource or repository not found: the uri is too long: at most 2048 characters",
        "{}",
        &answer.to_string()[..300]
    );
    let answer = s.request_frame("resources/read", json!({"uri": format!("repo-retriever://{}", big(2000))})).await;
    tally.tried += 1;
    tally.allowed += 1;
    assert_short(answer["error"]["message"].as_str().unwrap(), &big(2000));
    tally.print("argument caps");

    let rss_end = proc_status_kb(pid, "VmRSS:");
    let peak = proc_status_kb(pid, "VmHWM:");
    eprintln!("serve RSS: start {rss_start} kB, end {rss_end} kB, peak {peak} kB");
    assert!(rss_end < rss_start + RSS_MARGIN_KB, "RSS grew from {rss_start} kB to {rss_end} kB");
    assert!(s.close().await.success());
}

/// A frame over the stdio cap (bytes no client sends) is refused and skipped as it streams by; the
/// session goes on.
#[tokio::test]
async fn a_frame_over_the_stdio_cap_is_skipped() {
    let mut s =
        Server::with_backends("http://127.0.0.1:9", "unused", "http://127.0.0.1:9").timeout(BUDGET).raw_stdio().await;
    s.initialize().await;
    s.send_line(&"a".repeat(rr_mcp::stdio::MAX_FRAME_BYTES + 1)).await;
    let pong = s.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
    let refusal = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!(
        "request too large: a frame may be at most {} bytes",
        rr_mcp::stdio::MAX_FRAME_BYTES
    )}});
    let lines = s.stdout_lines();
    assert!(
        lines.iter().any(|l| serde_json::from_str::<Value>(l).ok().as_ref() == Some(&refusal)),
        "{:?}",
        lines.last()
    );
    assert!(s.close().await.success());
}

/// A backend whose next answer the test sets.
#[derive(Clone)]
struct Script(Arc<Mutex<Reply>>);

impl Script {
    fn new(reply: Reply) -> Self {
        Script(Arc::new(Mutex::new(reply)))
    }
    fn set(&self, reply: Reply) {
        *self.0.lock().unwrap() = reply;
    }
    fn get(&self) -> Reply {
        self.0.lock().unwrap().clone()
    }
}

fn chroma_hit(n: usize) -> Value {
    let ids: Vec<String> = (0..n).map(|i| format!("id{i}")).collect();
    let docs: Vec<String> = (0..n).map(|i| format!("Source: acme/widgets@main:f{i}.go\n\nbody {i}")).collect();
    let metas: Vec<Value> = (0..n)
        .map(|i| json!({"organization": "acme", "repository": "widgets", "branch": "main", "path": format!("f{i}.go"), "start_line": 1, "end_line": 2}))
        .collect();
    let dists: Vec<f64> = (0..n).map(|i| i as f64 / 10.0).collect();
    json!({"ids": [ids], "documents": [docs], "metadatas": [metas], "distances": [dists]})
}

/// The fake Chroma, embedder and reranker: the lookup always names collection `cid`; the query,
/// embedding and rerank answers are scripted.
async fn backends() -> (FakeServer, Script, Script, Script) {
    let query = Script::new(Reply::json(chroma_hit(2)));
    let embed = Script::new(Reply::json(json!({"data": [{"index": 0, "embedding": [0.1, 0.2, 0.3]}]})));
    let rerank = Script::new(Reply::json(
        json!({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}]}),
    ));
    let (q, e, r) = (query.clone(), embed.clone(), rerank.clone());
    let server = FakeServer::start(move |req| {
        if req.path.ends_with("/query") {
            q.get()
        } else if req.path == "/v1/embeddings" {
            e.get()
        } else if req.path == "/v1/rerank" {
            r.get()
        } else {
            Reply::json(json!({"id": "cid", "name": "c"}))
        }
    })
    .await;
    (server, query, embed, rerank)
}

fn huge() -> Reply {
    Reply::Huge { len: rr_http::MAX_RESPONSE_BYTES + 1, byte: b' ' }
}

fn trickle() -> Reply {
    Reply::Trickle { chunk: b" ".to_vec(), every: Duration::from_millis(100) }
}

/// Which backend a row scripts.
#[derive(Clone, Copy)]
enum Backend {
    Chroma,
    Embed,
    Rerank,
}

/// The malformed-reply table: the reply, then the drop-in's text and `serve`'s text.
fn malformed_table() -> Vec<(Backend, Reply, &'static str, &'static str)> {
    use Backend::*;
    let json = |s: &str| Reply::status(200, s.to_owned());
    vec![
        (
            Chroma,
            json("{}"),
            "Chroma query returned a malformed reply: `ids` holds 0 lists for 1 query embedding",
            "Chroma query returned a malformed reply: `ids` holds 0 lists for 1 query embedding (backend `chroma`)",
        ),
        (
            Chroma,
            json(
                r#"{"ids":[["a","b"]],"documents":[["Source: o/r@b:p\n\nx"]],"metadatas":[[{},{}]],"distances":[[0,1]]}"#,
            ),
            "Chroma query returned a malformed reply: 2 ids but 1 documents",
            "Chroma query returned a malformed reply: 2 ids but 1 documents (backend `chroma`)",
        ),
        (
            Chroma,
            json(
                r#"{"ids":[["a"]],"documents":[["Source: o/r@b:p\n\nx"]],"metadatas":[[{"organization":7,"repository":[],"branch":{}}]],"distances":[[0]]}"#,
            ),
            "Chroma query returned a malformed reply: metadata 0 field `organization` is a number, not a string",
            "Chroma query returned a malformed reply: metadata 0 field `organization` is a number, not a string (backend `chroma`)",
        ),
        (
            Chroma,
            json(r#"{"ids":[["a"]],"documents":[["x"]],"metadatas":[[42]],"distances":[[0]]}"#),
            "Chroma query returned a malformed reply: metadata 0 is a number, not an object",
            "Chroma query returned a malformed reply: metadata 0 is a number, not an object (backend `chroma`)",
        ),
        (
            Chroma,
            json(r#"{"ids":[null],"documents":[null],"metadatas":[null],"distances":[null]}"#),
            "Chroma query returned a malformed reply: `ids` holds null instead of a list",
            "Chroma query returned a malformed reply: `ids` holds null instead of a list (backend `chroma`)",
        ),
        (Chroma, json(r#"{"ids":"x"}"#), "", "Chroma query: the reply is not the expected JSON (backend `chroma`)"),
        (
            Chroma,
            huge(),
            "Chroma query: read response: the reply is larger than the 16777216-byte limit",
            "Chroma query: read response: the reply is larger than the 16777216-byte limit (backend `chroma`)",
        ),
        (
            Chroma,
            trickle(),
            "Chroma query: read response: context deadline exceeded (Client.Timeout or context cancellation while reading body)",
            "Chroma query: reading the reply timed out (backend `chroma`)",
        ),
        (
            Chroma,
            Reply::status(500, format!("internal: token Bearer {BEARER} at http://10.0.0.7:8000/x")),
            "Chroma query failed with HTTP 500: internal: token Bearer <redacted> at http://10.0.0.7:8000/x",
            "Chroma query failed with HTTP 500 (backend `chroma`)",
        ),
        (
            Embed,
            json("{}"),
            "embedding request returned no embedding",
            "embedding request returned no embedding (backend `openai`)",
        ),
        (
            Embed,
            json(r#"{"data":[{"embedding":[]}]}"#),
            "embedding request returned no embedding",
            "embedding request returned no embedding (backend `openai`)",
        ),
        (
            Embed,
            json(r#"{"data":[{"embedding":[1]},{"embedding":[2]}]}"#),
            "embedding request returned no embedding",
            "embedding request returned no embedding (backend `openai`)",
        ),
        (
            Embed,
            json(r#"{"data":[{"embedding":"x"}]}"#),
            "",
            "embedding request: the reply is not the expected JSON (backend `openai`)",
        ),
        (
            Embed,
            huge(),
            "embedding request: read response: the reply is larger than the 16777216-byte limit",
            "embedding request: read response: the reply is larger than the 16777216-byte limit (backend `openai`)",
        ),
        (
            Embed,
            Reply::status(401, format!("bad key {EMBED_KEY}")),
            "embedding request failed with HTTP 401: bad key <redacted>",
            "embedding request failed with HTTP 401 (backend `openai`)",
        ),
        (
            Rerank,
            json("{}"),
            "reranking request returned 0 results for 2 documents",
            "reranking request returned 0 results for 2 documents (backend `openai`)",
        ),
        (
            Rerank,
            json(r#"{"results":[{"index":0,"relevance_score":1},{"index":0,"relevance_score":2}]}"#),
            "reranking request returned invalid result indices",
            "reranking request returned invalid result indices (backend `openai`)",
        ),
        (
            Rerank,
            json(r#"{"results":[{"index":0,"relevance_score":1},{"index":5,"relevance_score":2}]}"#),
            "reranking request returned invalid result indices",
            "reranking request returned invalid result indices (backend `openai`)",
        ),
        (
            Rerank,
            huge(),
            "reranking request: read response: the reply is larger than the 16777216-byte limit",
            "reranking request: read response: the reply is larger than the 16777216-byte limit (backend `openai`)",
        ),
        (
            Rerank,
            Reply::status(400, format!("key {RERANK_KEY} rejected")),
            "reranking request failed with HTTP 400: key <redacted> rejected",
            "reranking request failed with HTTP 400 (backend `openai`)",
        ),
    ]
}

/// Runs the table against one server; `drop_in` picks the expected wording.
async fn run_malformed(drop_in: bool) -> Tally {
    let (fake, query, embed, rerank) = backends().await;
    let url = fake.url().to_owned();
    let common = [
        "--bearer-token",
        BEARER,
        "--embedding-api-key",
        EMBED_KEY,
        "--rerank-api-key",
        RERANK_KEY,
        "--retry-attempts",
        "1",
        "--request-timeout",
        "1s",
    ];
    let server = if drop_in {
        Server::with_backends(&url, "hostile", &url)
            .args(["--rerank-api-url", &url, "--rerank-model", "m", "--debug"])
            .args(common)
    } else {
        // `serve` over the same fakes: its reranking settings come from the drop-in's variables.
        Server::new()
            .args(["serve", "--tools", "search", "--chroma-url", &url, "--collection-name", "hostile"])
            .args(["--embedding-api-url", &url, "--embedding-model", "m"])
            .env("CHROMA_REPO_SEARCH_BEARER_TOKEN", BEARER)
            .env("CHROMA_REPO_SEARCH_EMBEDDING_API_KEY", EMBED_KEY)
            .env("CHROMA_REPO_SEARCH_RERANK_API_URL", &url)
            .env("CHROMA_REPO_SEARCH_RERANK_MODEL", "m")
            .env("CHROMA_REPO_SEARCH_RERANK_API_KEY", RERANK_KEY)
            .env("CHROMA_REPO_SEARCH_RETRY_ATTEMPTS", "1")
            .env("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", "1s")
            .env("RUST_LOG", "debug")
    };
    let mut s = server.timeout(BUDGET).stdio().await;
    let pid = s.pid().unwrap();
    let rss_start = proc_status_kb(pid, "VmRSS:");
    // A good reply first: the fakes answer as a Chroma would.
    let ok = call(&s, "search", json!({"query": "q"})).await;
    assert!(!is_error(&ok), "{ok}");
    let mut tally = Tally::default();
    let mut texts = Vec::new();
    for (backend, reply, reference, summary) in malformed_table() {
        let good = (
            Reply::json(chroma_hit(2)),
            Reply::json(json!({"data": [{"embedding": [0.1, 0.2, 0.3]}]})),
            Reply::json(
                json!({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}]}),
            ),
        );
        query.set(good.0);
        embed.set(good.1);
        rerank.set(good.2);
        match backend {
            Backend::Chroma => query.set(reply),
            Backend::Embed => embed.set(reply),
            Backend::Rerank => rerank.set(reply),
        }
        tally.tried += 1;
        let result = call(&s, "search", json!({"query": "q"})).await;
        let text = tool_text(&result).to_owned();
        assert!(is_error(&result), "{text}");
        tally.refused += 1;
        let expected = if drop_in { reference } else { summary };
        if expected.is_empty() {
            // A decode error in Go's words: only its start is ours to pin.
            assert!(text.contains(": decode response: "), "{text}");
        } else {
            assert_eq!(text, format!("repository content search failed: {expected}"));
        }
        if !drop_in {
            assert!(!text.contains("http://"), "a URL in {text}");
        }
        texts.push(text);
    }
    query.set(Reply::json(chroma_hit(2)));
    embed.set(Reply::json(json!({"data": [{"embedding": [0.1, 0.2, 0.3]}]})));
    rerank.set(Reply::json(
        json!({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}]}),
    ));
    tally.tried += 1;
    let ok = call(&s, "search", json!({"query": "q"})).await;
    assert!(!is_error(&ok), "{ok}");
    tally.allowed += 1;

    let rss_end = proc_status_kb(pid, "VmRSS:");
    let peak = proc_status_kb(pid, "VmHWM:");
    eprintln!(
        "{} RSS: start {rss_start} kB, end {rss_end} kB, peak {peak} kB",
        if drop_in { "drop-in" } else { "serve" }
    );
    assert!(rss_end < rss_start + RSS_MARGIN_KB, "RSS grew from {rss_start} kB to {rss_end} kB");
    assert!(s.close().await.success());
    let stderr = s.stderr();
    if drop_in {
        assert!(stderr.contains("malformed reply") || stderr.contains("backend"), "--debug logs the failures");
    }
    for secret in [BEARER, EMBED_KEY, RERANK_KEY] {
        assert!(!stderr.contains(secret), "secret on stderr");
        for text in texts.iter().chain(s.stdout_lines().iter()) {
            assert!(!text.contains(secret), "secret in {text}");
        }
    }
    tally
}

#[tokio::test]
async fn malformed_replies_in_the_drop_in() {
    run_malformed(true).await.print("malformed replies (drop-in)");
}

#[tokio::test]
async fn malformed_replies_in_serve() {
    run_malformed(false).await.print("malformed replies (serve)");
}

/// Against a real Chroma: the `path` cap refuses only what Chroma could not compile. The
/// widest literal Chroma accepts and four million stars are answered as the reference answers them;
/// a star-heavy path under the cap that Chroma refuses keeps the reference's text (HTTP 500); one
/// over the cap is refused at once.
#[tokio::test]
async fn drop_in_path_cap_matches_what_chroma_compiles() {
    let mut s = Server::fixture().args(["--retry-attempts", "1"]).timeout(BUDGET).stdio().await;
    let mut tally = Tally::default();
    let widest = "a".repeat(327_628);
    let no_match = "No relevant repository content was found. Try a broader or more specific query.";
    let result = call(&s, "search", json!({"query": "configuration", "path": widest})).await;
    assert_eq!((tool_text(&result), is_error(&result)), (no_match, false));
    let result = call(&s, "search", json!({"query": "configuration", "path": "*".repeat(4_000_000)})).await;
    assert!(tool_text(&result).starts_with("Found 5 relevant repository excerpts"), "{}", tool_text(&result));
    tally.tried += 2;
    tally.allowed += 2;
    // 9,800 `a*` cost 303,800 (under the cap) yet compile past Chroma's limit: Chroma's own answer.
    let result = call(&s, "search", json!({"query": "configuration", "path": "a*".repeat(9_800)})).await;
    assert_eq!(
        tool_text(&result),
        r#"repository content search failed: Chroma query failed with HTTP 500: {"error":"InternalError","message":"Error executing plan: Internal error: error returned from database: (code: 1043) constraint failed"}"#
    );
    tally.tried += 1;
    tally.allowed += 1;
    let result = call(&s, "search", json!({"query": "configuration", "path": "a".repeat(340_001)})).await;
    assert!(tool_text(&result).starts_with("path is too complex: "), "{}", tool_text(&result));
    tally.tried += 1;
    tally.refused += 1;
    tally.print("drop-in path cap (real Chroma)");
    assert!(s.close().await.success());
}
