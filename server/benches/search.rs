//! What a `search` tool call costs through our server, next to the floor, in one run.
//!
//! `cargo bench -p repo-retriever --bench search`
//!
//! The floor is the work no implementation can skip: the embedding call and the Chroma query, made
//! straight from this process with a pooled reqwest client (the same `"query: "` prefix, the same
//! `n_results`, the same `include` as the server sends). Every other row is a full `tools/call`
//! of `search` through the release binary, and its overhead is read against the floor measured at
//! the same concurrency in the same run, so a loaded embed server or Chroma shows up on both sides.
//!
//! Rows, run level by level (1, 8, 32 concurrent clients), each level's floor first:
//! - `floor`: `c` tasks each doing embed + query, back to back, on one pooled reqwest client.
//! - `stdio, 1 process, pipelined`: one long-lived server, `c` requests in flight on its pipes.
//! - `stdio, c processes`: one server per client, one request in flight each. This is how stdio is
//!   used in practice (every MCP client spawns its own server), so it is the realistic stdio row.
//! - `http, pooled client`: one server with `--http 127.0.0.1:<port>`, stateless POST `/mcp`, `c`
//!   tasks sharing one pooled reqwest client.
//!
//! With `RR_BASELINE_BIN=<another build of repo-retriever>` (for instance the release binary of
//! `main`), the three server rows are also run against that binary at every level, right after
//! the rows of this build and against the same floor, marked `(baseline)`: two builds compared
//! side by side in one run, on the same Chroma, embed server and load. The order itself moves
//! single rows by several per cent (the build measured first tends to look cheaper), so a
//! comparison is best read over runs in both orders: `RR_SERVER_BIN=<the other build>` with
//! `RR_BASELINE_BIN=<this build>` swaps them.
//!
//! An error is a transport failure, a non-200 status, a JSON-RPC error or an `isError` result.
//! Each row runs a warm-up at its concurrency first, then [`CALLS_PER_ROW`] timed calls, cycling
//! through [`QUERIES`]. Nothing is asserted: the bench prints a Markdown table and a summary line.
//! Run by `cargo test` (without `--bench`), it only checks that each path answers, untimed.
//!
//! The CPU columns are CPU time per timed call, from each thread's `/proc/<pid>/task/<tid>/schedstat`
//! (nanoseconds; [`CpuClock`] falls back to `/proc/<pid>/stat`'s 10 ms ticks when a thread ended
//! during the row): of the servers under test, of the embed server, and of this process (for the floor, all of the
//! floor's work; otherwise the MCP clients). Once the machine's cores are busy, latency mostly
//! measures the wait for a core, and the CPU a call costs says more about our server than its p50.
//!
//! Chroma 1.5.9 comes from the integration tests' support (`CHROMA_URL`, else `CHROMA_BIN`, else
//! `.venv/bin/chroma`; its watchdog stops a Chroma it started once this process has exited). The
//! embed server is `testdata/embed_server.py`, started here with Nagle's algorithm off (see
//! [`EmbedServer`]), or `EMBED_URL`. The fixture `testdata/records.jsonl` goes into its own
//! collection. Everything listens on 127.0.0.1; every process the bench starts is killed at the end.

// The bench uses part of the tests' helpers: the re-exports it does not use are unused imports here.
#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

/// Realistic questions about the fixture repository, cycled through by every row.
const QUERIES: [&str; 10] = [
    "where is the configuration loaded and validated",
    "how does the store persist widgets",
    "retry policy and timeouts for the HTTP client",
    "WidgetClient list widgets in Python",
    "main entry point of the widgetd daemon",
    "environment variables that override the config file",
    "TypeScript app that fetches and renders widgets",
    "what changed in the latest release",
    "Rust library widget struct",
    "notes about Windows line endings",
];
/// The `limit` every call asks for.
const LIMIT: usize = 5;
/// What the server fetches for [`LIMIT`] without a reranker (15 for 5).
const N_RESULTS: usize = LIMIT * rr_core::pipeline::CANDIDATES_PER_RESULT;
/// Concurrent clients per row.
const CONCURRENCY: [usize; 3] = [1, 8, 32];
/// Timed calls per row (a multiple of every concurrency level).
const CALLS_PER_ROW: usize = 320;
/// Untimed calls per row, at the row's concurrency, before the timed ones.
const WARMUP_CALLS: usize = 64;
/// A call that takes longer than this counts as an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The collection the bench loads the fixture into (and deletes at the end).
const COLLECTION: &str = "bench-acme-widgets";

/// The name this binary answers to under `cargo test`, for test-name filters and `--list`.
const SMOKE_TEST_NAME: &str = "search_bench_smoke";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`. `cargo test --all-targets` (scripts/test) runs this binary
    // without it: then every path is only checked to answer, untimed, so the test suite stays
    // quick, and like a libtest binary it honours `--list` and name filters.
    let timed = args.iter().any(|arg| arg == "--bench");
    if !timed {
        if args.iter().any(|arg| arg == "--list") {
            println!("{SMOKE_TEST_NAME}: test");
            return;
        }
        let filters: Vec<&String> = args.iter().filter(|arg| !arg.starts_with('-')).collect();
        if !filters.is_empty() && !filters.iter().any(|f| SMOKE_TEST_NAME.contains(f.as_str())) {
            return;
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run(timed));
}

async fn run(timed: bool) {
    let load_before = load_average();
    let chroma_url = support::chroma().url().to_string();
    let mut embed = EmbedServer::start().await;
    let collection_id = support::load_fixture(&chroma_url, COLLECTION).await;
    let fixture = support::Fixture {
        chroma_url,
        embed_url: embed.url.clone(),
        collection: COLLECTION.to_string(),
        collection_id,
    };
    eprintln!("Chroma at {}, embed server at {}", fixture.chroma_url, fixture.embed_url);

    // Every server is up before anything is timed; the rows of one concurrency level run back to
    // back, so each is compared with a floor measured moments before it.
    let max_clients = if timed { CONCURRENCY.into_iter().max().unwrap_or(1) } else { 1 };
    let mut builds = vec![Build::spawn("", &support::server_bin(), &fixture, max_clients).await];
    if let Some(baseline) = std::env::var_os("RR_BASELINE_BIN").filter(|v| !v.is_empty()) {
        builds.push(Build::spawn(" (baseline)", Path::new(&baseline), &fixture, max_clients).await);
    }
    let floor = Subject::new("floor: embed + Chroma query", Target::Floor(Floor::new(&fixture)), Vec::new());
    sanity_check(&floor).await;
    for build in &builds {
        sanity_check(&build.pipelined).await;
        sanity_check(&build.http).await;
    }

    let embed_pids = embed.pids();
    let levels: &[usize] = if timed { &CONCURRENCY } else { &[] };
    let mut rows = Vec::new();
    for &c in levels {
        rows.push(measure(&floor, c, &embed_pids).await);
        for build in &builds {
            rows.push(measure(&build.pipelined, c, &embed_pids).await);
            if c > 1 {
                let name = format!("stdio, {c} processes{}", build.label);
                let per_client = Subject::stdio(&name, &build.stdio_servers[..c]);
                rows.push(measure(&per_client, c, &embed_pids).await);
            }
            rows.push(measure(&build.http, c, &embed_pids).await);
        }
    }

    for build in &mut builds {
        build.stop().await;
    }
    support::delete_collection(&fixture.chroma_url, COLLECTION).await;
    embed.stop().await;

    if timed {
        println!("{}", report(&rows, &load_before, &load_average()));
    } else {
        println!(
            "search bench: every path answered (untimed; `cargo bench -p repo-retriever --bench search` times them)"
        );
    }
}

/// The servers of one build: `max_clients` stdio processes and one HTTP server, and the rows'
/// subjects over them.
struct Build {
    label: &'static str,
    stdio_servers: Vec<StdioServer>,
    http_server: HttpServer,
    pipelined: Subject,
    http: Subject,
}

impl Build {
    async fn spawn(label: &'static str, bin: &Path, fixture: &support::Fixture, max_clients: usize) -> Build {
        let mut stdio_servers = Vec::new();
        for _ in 0..max_clients {
            stdio_servers.push(StdioServer::spawn(fixture, bin).await);
        }
        let http_server = HttpServer::spawn(fixture, bin).await;
        let pipelined = Subject::stdio(&format!("stdio, 1 process, pipelined{label}"), &stdio_servers[..1]);
        let http = Subject::new(
            &format!("http, pooled client{label}"),
            Target::Http(HttpClient::new(&http_server.url)),
            http_server.pid(),
        );
        Build { label, stdio_servers, http_server, pipelined, http }
    }

    async fn stop(&mut self) {
        for server in &mut self.stdio_servers {
            let _ = server.child.kill().await;
        }
        let _ = self.http_server.child.kill().await;
    }
}

/// `testdata/embed_server.py` as the tests run it, but with Nagle's algorithm off on its sockets.
///
/// The script writes a response's head and body in two `send`s. On a kept-alive connection the
/// second waits for the ACK of the first, which the client delays: every call after a
/// connection's first then takes ~40 ms longer, a stall of the test server alone (real embedding
/// servers set `TCP_NODELAY`) that would hide everything this bench measures. Same code, same
/// vectors; only `Handler.disable_nagle_algorithm` is set. `EMBED_URL` uses a running server instead.
struct EmbedServer {
    url: String,
    child: Option<Child>,
}

const EMBED_SERVER_LAUNCHER: &str = "import sys
sys.path.insert(0, sys.argv[1])
import embed_server
embed_server.Handler.disable_nagle_algorithm = True
sys.argv = [sys.argv[0], '--host', '127.0.0.1', '--port', sys.argv[2]]
embed_server.main()";

impl EmbedServer {
    async fn start() -> Self {
        if let Some(url) = std::env::var("EMBED_URL").ok().filter(|v| !v.is_empty()) {
            return EmbedServer { url: url.trim_end_matches('/').to_string(), child: None };
        }
        let python = std::env::var("PYTHON").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| "python3".into());
        let port = support::free_port();
        let mut child = Command::new(&python)
            .arg("-c")
            .arg(EMBED_SERVER_LAUNCHER)
            .arg(support::testdata_dir())
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {python} for the embed server: {e}"));
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if reqwest::get(format!("{url}/health")).await.is_ok_and(|r| r.status().is_success()) {
                return EmbedServer { url, child: Some(child) };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the embed server exited during start-up ({status})");
            }
            assert!(Instant::now() < deadline, "the embed server did not answer on {url} within 30 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The pid of the embed server this bench started (none for `EMBED_URL`).
    fn pids(&self) -> Vec<u32> {
        self.child.as_ref().and_then(Child::id).into_iter().collect()
    }

    async fn stop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill().await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What one call is, per target
// ---------------------------------------------------------------------------------------------

enum Target {
    /// Embed + Chroma query straight from this process.
    Floor(Floor),
    /// Clients of stdio servers; client `i` uses server `i % len`.
    Stdio(Vec<Arc<StdioClient>>),
    Http(HttpClient),
}

impl Target {
    /// One search for `query` by client `client`; the tool's text on success.
    async fn call(&self, client: usize, query: &str) -> Result<String, String> {
        let call = async {
            match self {
                Target::Floor(floor) => floor.search(query).await,
                Target::Stdio(clients) => {
                    let response = clients[client % clients.len()].request("tools/call", search_params(query)).await?;
                    tool_text(&response)
                }
                Target::Http(http) => http.search(query).await,
            }
        };
        tokio::time::timeout(CALL_TIMEOUT, call).await.unwrap_or_else(|_| Err(format!("no answer in {CALL_TIMEOUT:?}")))
    }
}

fn search_params(query: &str) -> Value {
    json!({"name": "search", "arguments": {"query": query, "limit": LIMIT}})
}

/// The text of a successful `tools/call` response; JSON-RPC errors and `isError` results are errors.
fn tool_text(response: &Value) -> Result<String, String> {
    if let Some(error) = response.get("error") {
        return Err(format!("JSON-RPC error {error}"));
    }
    let result = &response["result"];
    let text = result["content"][0]["text"].as_str().ok_or_else(|| format!("no text content in {response}"))?;
    if support::is_error(result) {
        return Err(format!("isError: {text}"));
    }
    Ok(text.to_string())
}

/// The floor: what the server has to wait for on every call, and nothing else.
struct Floor {
    client: reqwest::Client,
    embeddings_url: String,
    query_url: String,
}

impl Floor {
    fn new(fixture: &support::Fixture) -> Self {
        let collections = support::collections_url(&fixture.chroma_url, support::TENANT, support::DATABASE);
        Floor {
            client: reqwest::Client::new(),
            embeddings_url: format!("{}/v1/embeddings", fixture.embed_url),
            // The server caches the collection id too, so neither side looks it up per call.
            query_url: format!("{collections}/{}/query", fixture.collection_id),
        }
    }

    async fn search(&self, query: &str) -> Result<String, String> {
        let mut embedded = post_json(
            &self.client,
            &self.embeddings_url,
            json!({"input": [format!("query: {query}")], "model": support::EMBED_MODEL}),
        )
        .await?;
        if !embedded["data"][0]["embedding"].is_array() {
            return Err(format!("no embedding in {embedded}"));
        }
        let embedding = embedded["data"][0]["embedding"].take();
        let body = json!({
            "query_embeddings": [embedding],
            "n_results": N_RESULTS,
            "include": ["documents", "metadatas", "distances"],
        });
        let found = post_json(&self.client, &self.query_url, body).await?;
        Ok(found["metadatas"].to_string())
    }
}

async fn post_json(client: &reqwest::Client, url: &str, body: Value) -> Result<Value, String> {
    let response = client.post(url).json(&body).send().await.map_err(|e| format!("POST {url}: {e}"))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| format!("POST {url}: {e}"))?;
    if status != reqwest::StatusCode::OK {
        return Err(format!("POST {url}: HTTP {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("POST {url}: {e}"))
}

/// Stateless Streamable HTTP: every call is one POST to `/mcp`, on a shared connection pool.
struct HttpClient {
    client: reqwest::Client,
    url: String,
    next_id: AtomicU64,
}

impl HttpClient {
    fn new(url: &str) -> Self {
        HttpClient { client: reqwest::Client::new(), url: url.to_string(), next_id: AtomicU64::new(1) }
    }

    async fn search(&self, query: &str) -> Result<String, String> {
        let id = json!(self.next_id.fetch_add(1, Ordering::Relaxed));
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": search_params(query)});
        let response = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(request.to_string())
            .send()
            .await
            .map_err(|e| format!("POST /mcp: {e}"))?;
        let status = response.status();
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let body = response.text().await.map_err(|e| format!("POST /mcp: {e}"))?;
        if status != reqwest::StatusCode::OK {
            return Err(format!("POST /mcp: HTTP {status}: {body}"));
        }
        let messages = parse_mcp_body(&content_type, &body);
        let reply = messages.iter().find(|m| m["id"] == id).ok_or_else(|| format!("no response to {id} in {body}"))?;
        tool_text(reply)
    }
}

/// The JSON-RPC messages of a JSON body or of the `data:` lines of an SSE body (a baseline build
/// may answer either way).
fn parse_mcp_body(content_type: &str, body: &str) -> Vec<Value> {
    if !content_type.starts_with("text/event-stream") {
        return match serde_json::from_str::<Value>(body) {
            Ok(Value::Array(items)) => items,
            Ok(v) => vec![v],
            Err(_) => Vec::new(),
        };
    }
    let mut out = Vec::new();
    for event in body.replace("\r\n", "\n").split("\n\n") {
        let data: Vec<&str> =
            event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        if let Ok(v) = serde_json::from_str::<Value>(&data.join("\n")) {
            match v {
                Value::Array(items) => out.extend(items),
                v => out.push(v),
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// A pipelining stdio client
// ---------------------------------------------------------------------------------------------

/// Newline-delimited JSON-RPC over a server's pipes, any number of requests in flight: a writer task
/// owns stdin, a reader task hands each response to whoever waits for its id.
struct StdioClient {
    frames: mpsc::UnboundedSender<String>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>,
    next_id: AtomicU64,
}

impl StdioClient {
    async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id, tx);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.frames.send(frame.to_string()).map_err(|_| "the server's stdin is closed".to_string())?;
        rx.await.map_err(|_| "the server closed stdout before answering".to_string())
    }

    fn notify(&self, method: &str) -> Result<(), String> {
        let frame = json!({"jsonrpc": "2.0", "method": method});
        self.frames.send(frame.to_string()).map_err(|_| "the server's stdin is closed".to_string())
    }
}

/// The release binary with the four flags that point it at the fixture, and nothing else: the
/// `CHROMA_REPO_SEARCH_*` and `MCP_CHROMADB_REPO_SEARCH_*` variables of this shell are removed.
fn server_command(fixture: &support::Fixture, bin: &Path) -> Command {
    let mut command = Command::new(bin);
    command.args(["--server-url", &fixture.chroma_url, "--collection-name", &fixture.collection]);
    command.args(["--embedding-api-url", &fixture.embed_url, "--embedding-model", support::EMBED_MODEL]);
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("CHROMA_REPO_SEARCH_") || name.starts_with("MCP_CHROMADB_REPO_SEARCH_") {
            command.env_remove(&key);
        }
    }
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    command
}

/// One `repo-retriever` process in stdio mode, initialised.
struct StdioServer {
    child: Child,
    client: Arc<StdioClient>,
}

impl StdioServer {
    async fn spawn(fixture: &support::Fixture, bin: &Path) -> Self {
        let mut child = server_command(fixture, bin).spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");

        let (frames, mut outgoing) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(mut frame) = outgoing.recv().await {
                frame.push('\n');
                if stdin.write_all(frame.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>> = Arc::default();
        let pending = waiting.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
                let Some(id) = message["id"].as_u64() else { continue };
                if let Some(waiter) = pending.lock().unwrap().remove(&id) {
                    let _ = waiter.send(message);
                }
            }
            // End of output: fail everyone still waiting.
            pending.lock().unwrap().clear();
        });

        let client = Arc::new(StdioClient { frames, waiting, next_id: AtomicU64::new(1) });
        let init = client.request("initialize", support::initialize_params()).await;
        let init = init.unwrap_or_else(|e| panic!("stdio initialize: {e}"));
        assert!(init.get("result").is_some(), "stdio initialize failed: {init}");
        client.notify("notifications/initialized").expect("send notifications/initialized");
        StdioServer { child, client }
    }
}

/// One `repo-retriever --http 127.0.0.1:<port>`; its request log (stdout) is read and dropped, as a
/// log collector would read it.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    async fn spawn(fixture: &support::Fixture, bin: &Path) -> Self {
        let addr = format!("127.0.0.1:{}", support::free_port());
        let mut child = server_command(fixture, bin)
            .args(["--http", &addr])
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut log = child.stdout.take().expect("piped stdout");
        tokio::spawn(async move { tokio::io::copy(&mut log, &mut tokio::io::sink()).await });
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(&addr).await.is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the HTTP server exited during start-up ({status})");
            }
            assert!(Instant::now() < deadline, "the HTTP server did not listen on {addr} within 30 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        HttpServer { child, url: format!("http://{addr}/mcp") }
    }

    fn pid(&self) -> Vec<u32> {
        self.child.id().into_iter().collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Running a row and reporting
// ---------------------------------------------------------------------------------------------

/// What a row measures: a target, and the pids of the server processes behind it (none for the floor).
struct Subject {
    name: String,
    target: Arc<Target>,
    pids: Vec<u32>,
}

impl Subject {
    fn new(name: &str, target: Target, pids: Vec<u32>) -> Self {
        Subject { name: name.to_string(), target: Arc::new(target), pids }
    }

    /// Client `i` talks to `servers[i % servers.len()]`.
    fn stdio(name: &str, servers: &[StdioServer]) -> Self {
        let clients = servers.iter().map(|s| s.client.clone()).collect();
        Subject::new(name, Target::Stdio(clients), servers.iter().filter_map(|s| s.child.id()).collect())
    }
}

/// Before anything is timed: the subject finds the file the first query is about.
async fn sanity_check(subject: &Subject) {
    let text = subject
        .target
        .call(0, QUERIES[0])
        .await
        .unwrap_or_else(|e| panic!("{}: sanity call failed: {e}", subject.name));
    assert!(
        text.contains("internal/config/config.go"),
        "{}: the first query should find internal/config/config.go: {text}",
        subject.name
    );
}

struct Row {
    name: String,
    clients: usize,
    /// Every timed call's latency, sorted.
    latencies: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
    /// CPU time (user + system) the servers under test spent on the timed calls.
    server_cpu: Option<Duration>,
    /// CPU time the embed server spent on the timed calls.
    embed_cpu: Option<Duration>,
    /// CPU time this process (the clients, or for the floor the whole embed + query) spent.
    client_cpu: Option<Duration>,
}

impl Row {
    fn percentile(&self, p: f64) -> Duration {
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        self.latencies[rank.clamp(1, self.latencies.len()) - 1]
    }

    fn p50(&self) -> Duration {
        self.percentile(50.0)
    }

    fn calls_per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn per_call(&self, cpu: Option<Duration>) -> String {
        cpu.map_or_else(
            || "–".to_string(),
            |cpu| format!("{:.3}", (cpu / self.latencies.len() as u32).as_secs_f64() * 1000.0),
        )
    }
}

/// A warm-up of [`WARMUP_CALLS`], then [`CALLS_PER_ROW`] timed calls by `clients` concurrent clients.
async fn measure(subject: &Subject, clients: usize, embed_pids: &[u32]) -> Row {
    run_calls(&subject.target, clients, WARMUP_CALLS).await;
    let this_process = [std::process::id()];
    let server_clock = CpuClock::start(&subject.pids);
    let embed_clock = CpuClock::start(embed_pids);
    let client_clock = CpuClock::start(&this_process);
    let started = Instant::now();
    let (mut latencies, failures) = run_calls(&subject.target, clients, CALLS_PER_ROW).await;
    let elapsed = started.elapsed();
    let (server_cpu, embed_cpu, client_cpu) = (server_clock.elapsed(), embed_clock.elapsed(), client_clock.elapsed());
    latencies.sort();
    let name = &subject.name;
    if let Some(first) = failures.first() {
        eprintln!("{name} x{clients}: {} errors, first: {first}", failures.len());
    }
    let row = Row {
        name: name.clone(),
        clients,
        latencies,
        errors: failures.len(),
        elapsed,
        server_cpu,
        embed_cpu,
        client_cpu,
    };
    eprintln!("{name} x{clients}: p50 {} ms, {:.0} calls/s", ms(row.p50()), row.calls_per_second());
    row
}

/// `calls` calls shared out to `clients` tasks, each making one call at a time; returns every
/// call's latency and the error of each failed call.
async fn run_calls(target: &Arc<Target>, clients: usize, calls: usize) -> (Vec<Duration>, Vec<String>) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for client in 0..clients {
        let (target, next) = (target.clone(), next.clone());
        tasks.spawn(async move {
            let (mut latencies, mut failures) = (Vec::new(), Vec::new());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= calls {
                    return (latencies, failures);
                }
                let started = Instant::now();
                let outcome = target.call(client, QUERIES[i % QUERIES.len()]).await;
                latencies.push(started.elapsed());
                failures.extend(outcome.err());
            }
        });
    }
    let (mut latencies, mut failures) = (Vec::with_capacity(calls), Vec::new());
    while let Some(done) = tasks.join_next().await {
        let (l, f) = done.expect("a client task panicked");
        latencies.extend(l);
        failures.extend(f);
    }
    (latencies, failures)
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// The machine, the command, the table and whether the target is met, in Markdown.
fn report(rows: &[Row], load_before: &str, load_after: &str) -> String {
    let is_floor = |row: &Row| row.name.starts_with("floor");
    let floor_p50 = |clients: usize| {
        rows.iter().find(|r| r.clients == clients && is_floor(r)).map(Row::p50).expect("a floor row per level")
    };
    let max_clients = CONCURRENCY.into_iter().max().unwrap_or(1);
    let mut out = format!(
        "Machine: {} CPUs, {}. Load average (1/5/15 min) before: {load_before}, after: {load_after}.\n\n\
         Command: `cargo bench -p repo-retriever --bench search`\n\n\
         {CALLS_PER_ROW} timed calls per row after {WARMUP_CALLS} warm-up calls, `limit` {LIMIT} \
         (`n_results` {N_RESULTS}), {} queries cycling.\n\n\
         | path | clients | calls | p50 ms | p99 ms | calls/s | errors | p50 over floor ms | p50 / floor \
         | server CPU ms/call | embed CPU ms/call | client CPU ms/call |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        num_cpus(),
        cpu_model(),
        QUERIES.len()
    );
    // Per level, the largest p50 over that level's floor, in ms.
    let mut worst_overhead: Vec<(usize, f64)> = CONCURRENCY.iter().map(|&c| (c, f64::NEG_INFINITY)).collect();
    let mut errors_at_max = 0;
    for row in rows {
        let floor = floor_p50(row.clients);
        let over_ms = (row.p50().as_secs_f64() - floor.as_secs_f64()) * 1000.0;
        if !is_floor(row) {
            if let Some((_, worst)) = worst_overhead.iter_mut().find(|(clients, _)| *clients == row.clients) {
                *worst = worst.max(over_ms);
            }
            errors_at_max += if row.clients == max_clients { row.errors } else { 0 };
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {} | {:+.2} | {:.2}x | {} | {} | {} |\n",
            row.name,
            row.clients,
            row.latencies.len(),
            ms(row.p50()),
            ms(row.percentile(99.0)),
            row.calls_per_second(),
            row.errors,
            over_ms,
            row.p50().as_secs_f64() / floor.as_secs_f64(),
            row.per_call(row.server_cpu),
            row.per_call(row.embed_cpu),
            row.per_call(row.client_cpu),
        ));
    }
    let worst: Vec<String> =
        worst_overhead.iter().map(|(clients, over)| format!("{over:+.2} ms at {clients} client(s)")).collect();
    out.push_str(&format!(
        "\nLargest p50 over the floor (target < 1 ms): {}. Errors at {max_clients} clients: {errors_at_max} \
         (target 0).\n",
        worst.join(", ")
    ));
    out
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".to_string())
}

/// `/proc/loadavg`'s first three fields: other work on the machine skews every row.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    if fields.len() == 3 { fields.join(" / ") } else { "unknown".to_string() }
}

/// The CPU time some processes spend from [`CpuClock::start`] on, all threads.
///
/// Exact to the nanosecond when every thread that ran at the start is still there at the end:
/// the sum over threads of the time on CPU in `/proc/<pid>/task/<tid>/schedstat`, a thread that
/// began meanwhile counted whole. A thread that ended meanwhile took its schedstat with it, so then
/// the clock falls back to user + system time from `/proc/<pid>/stat`, in 10 ms ticks. `None`
/// without pids or without `/proc`.
struct CpuClock<'a> {
    pids: &'a [u32],
    start: Option<(Duration, ThreadTimes)>,
}

/// Nanoseconds on CPU by (pid, tid).
type ThreadTimes = HashMap<(u32, u32), u64>;

impl<'a> CpuClock<'a> {
    fn start(pids: &'a [u32]) -> Self {
        CpuClock { pids, start: cpu_time(pids).zip(thread_times(pids)) }
    }

    fn elapsed(&self) -> Option<Duration> {
        let (ticks_start, threads_start) = self.start.as_ref()?;
        let threads = thread_times(self.pids)?;
        if threads_start.keys().all(|tid| threads.contains_key(tid)) {
            let ns: u64 =
                threads.iter().map(|(tid, ns)| ns.saturating_sub(*threads_start.get(tid).unwrap_or(&0))).sum();
            return Some(Duration::from_nanos(ns));
        }
        Some(cpu_time(self.pids)?.saturating_sub(*ticks_start))
    }
}

/// Nanoseconds on CPU of every thread of `pids`; `None` where the kernel keeps no schedstat.
fn thread_times(pids: &[u32]) -> Option<ThreadTimes> {
    let mut out = HashMap::new();
    for &pid in pids {
        for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
            // A thread that ends between the listing and the read is simply not counted.
            let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else { continue };
            let ns = text.split_whitespace().next()?.parse::<u64>().ok()?;
            out.insert((pid, tid), ns);
        }
    }
    (!out.is_empty()).then_some(out)
}

fn cpu_time(pids: &[u32]) -> Option<Duration> {
    /// `/proc` counts in USER_HZ, which Linux fixes at 100 for user space.
    const MS_PER_TICK: u64 = 10;
    let mut ticks = 0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command name (in parentheses, may hold spaces): state is field 3,
        // utime 14, stime 15.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        ticks += fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    }
    (!pids.is_empty()).then(|| Duration::from_millis(ticks * MS_PER_TICK))
}
