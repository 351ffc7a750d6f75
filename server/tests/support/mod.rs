//! Shared support for the integration tests of `repo-retriever` (`tests/main.rs` declares it once,
//! each test module says `use crate::support;`).
//!
//! The tests run against the real thing: a real Chroma 1.5.9 server and the deterministic
//! OpenAI-compatible embed server from `testdata/embed_server.py`, both started once per test
//! binary, and the records that the reference indexer wrote for `testdata/corpus/`.
//!
//! The services are started by `rr-testkit` (shared with the other crates' tests), behind a shell
//! watchdog that stops them once the test process is gone; their logs go to
//! `CARGO_TARGET_TMPDIR/test-services`.
//!
//! Environment:
//! - `CHROMA_URL`: use an already running Chroma instead of starting one.
//! - `CHROMA_BIN`: the `chroma` executable; else `<workspace>/.venv/bin/chroma`, else `chroma` on `PATH`.
//! - `EMBED_URL`: use an already running embed server instead of starting one.
//! - `PYTHON`: the interpreter for the embed server (default `python3`).
//! - `RR_SERVER_BIN`: run the tests against this binary instead of the one Cargo built.
//!
//! The server under test is driven through [`Server`], which spawns the built binary and speaks MCP
//! over stdio ([`McpStdio`]) or Streamable HTTP ([`McpHttp`]).

#![allow(dead_code)]

/// The navigation tests' helpers, shared with rr-nav's own integration tests.
#[path = "../../../nav/tests/support.rs"]
pub mod nav;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransport, StreamableHttpClientTransportConfig};

/// The model name passed to the embed server (it accepts any).
pub use rr_testkit::EMBED_MODEL;
/// `tools/list` of a server with every navigation tool, in order: `search` first, then the seven.
pub const ALL_TOOLS: [&str; 8] = [
    "search",
    "list_repositories",
    "search_code",
    "get_file",
    "list_definitions",
    "analyze_repository",
    "find_patterns",
    "add_repository",
];
/// Default wait for one MCP response.
const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Background services (Chroma, embed server): the workspace's test kit starts them
// ---------------------------------------------------------------------------------------------

pub use rr_testkit::{fixture_records, free_port, testdata_dir};

/// The number of records in `testdata/records.jsonl`.
pub const FIXTURE_RECORDS: usize = rr_testkit::FIXTURE_RECORDS;

/// Where service logs go: Cargo's per-package temporary folder for integration tests.
fn log_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-services")
}

/// The real Chroma shared by all tests of one test binary: started on first use (or adopted from
/// `CHROMA_URL`); later calls return the same.
pub fn chroma() -> &'static rr_testkit::Service {
    rr_testkit::chroma(&log_dir())
}

/// The deterministic OpenAI-compatible embeddings and rerank server (`testdata/embed_server.py`)
/// shared by one test binary: started on first use (or adopted from `EMBED_URL`).
pub fn embed_server() -> &'static rr_testkit::Service {
    rr_testkit::embed_server(&log_dir())
}

/// `GET /health` of the embed server: `{status, dim, embeddings_requests, embeddings_inputs, rerank_requests}`.
pub async fn embed_health(embed_url: &str) -> Value {
    let resp = reqwest::get(format!("{embed_url}/health")).await.expect("GET /health");
    resp.json().await.expect("health JSON")
}

// ---------------------------------------------------------------------------------------------
// The fixture records and Chroma's v2 REST API
// ---------------------------------------------------------------------------------------------

pub use rr_testkit::{
    DATABASE, FIXTURE_COLLECTION, TENANT, chroma_query, collection_count, collection_get, collections_url,
    create_tenant_database, delete_collection, delete_collection_in, load_fixture, load_fixture_subset, load_records,
    load_records_in, send_json,
};

/// `POST <embed>/v1/embeddings` for one raw input (no prefix added).
pub async fn embed_text(embed_url: &str, input: &str) -> Vec<f64> {
    let body = json!({"model": EMBED_MODEL, "input": [input]});
    let v = send_json(reqwest::Client::new().post(format!("{embed_url}/v1/embeddings")).json(&body), "embed").await;
    v["data"][0]["embedding"]
        .as_array()
        .unwrap_or_else(|| panic!("embed: no embedding in {v}"))
        .iter()
        .map(|x| x.as_f64().expect("embedding value is a number"))
        .collect()
}

/// The embedding the server computes for a search: `"query: " + query`.
pub async fn embed_query(embed_url: &str, query: &str) -> Vec<f64> {
    embed_text(embed_url, &format!("query: {query}")).await
}

/// Chroma, the embed server and the 89 fixture records in [`FIXTURE_COLLECTION`], set up once per
/// test binary.
pub use rr_testkit::Fixture;

/// The shared [`Fixture`]; callable from sync and async tests alike.
pub fn fixture() -> &'static Fixture {
    rr_testkit::fixture(&log_dir())
}

// ---------------------------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------------------------

/// The binary under test: the one Cargo built, or `RR_SERVER_BIN` when set (to run the same tests
/// against another build, such as the reference `mcp-chromadb-repo-search`).
pub fn server_bin() -> PathBuf {
    match std::env::var_os("RR_SERVER_BIN").filter(|v| !v.is_empty()) {
        Some(bin) => PathBuf::from(bin),
        None => PathBuf::from(env!("CARGO_BIN_EXE_repo-retriever")),
    }
}

/// `index <dir> --store <store>` as the fixture's repository, `acme/widgets`, with `extra`
/// arguments after; the summary it prints, checked to be one JSON object. The environment's store
/// and cross-encoder are not passed on.
pub fn index(dir: &Path, store: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "index",
        dir.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--organization",
        "acme",
        "--repository",
        "widgets",
    ];
    args.extend_from_slice(extra);
    let out = Command::new(server_bin())
        .args(&args)
        .env_remove("REPO_RETRIEVER_STORE")
        .env_remove("RR_CROSS_ENCODER_DIR")
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON object on stdout: {stdout}");
    serde_json::from_str(&stdout).unwrap()
}

/// The `initialize` request a client sends first.
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "repo-retriever-tests", "version": "1"},
    })
}

/// The text of the first content item of a `tools/call` result.
pub fn tool_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content in tool result: {result}"))
}

/// The file of each excerpt of a `search` answer, in order.
pub fn excerpt_files(markdown: &str) -> Vec<&str> {
    markdown.lines().filter_map(|l| l.strip_prefix("**File:** `")).map(|l| l.split('#').next().unwrap_or(l)).collect()
}

/// How often the most frequent file of a `search` answer stands in it.
pub fn most_per_file(markdown: &str) -> usize {
    let files = excerpt_files(markdown);
    files.iter().map(|f| files.iter().filter(|g| *g == f).count()).max().unwrap_or(0)
}

/// Whether a `tools/call` result is flagged `isError: true`.
pub fn is_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or(false)
}

/// How to start the binary: arguments and environment. Inherited `CHROMA_REPO_SEARCH_*` and
/// `MCP_CHROMADB_REPO_SEARCH_*` variables are removed, so only what a test sets is seen.
#[derive(Debug, Clone, Default)]
pub struct Server {
    args: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Option<Duration>,
}

impl Server {
    /// No arguments at all.
    pub fn new() -> Self {
        Self::default()
    }

    /// The four required flags pointing at the given Chroma collection and embed server.
    pub fn with_backends(chroma_url: &str, collection: &str, embed_url: &str) -> Self {
        Self::new().args(["--server-url", chroma_url, "--collection-name", collection]).args([
            "--embedding-api-url",
            embed_url,
            "--embedding-model",
            EMBED_MODEL,
        ])
    }

    /// [`Server::with_backends`] on the shared [`fixture()`] collection.
    pub fn fixture() -> Self {
        let f = fixture();
        Self::with_backends(&f.chroma_url, &f.collection, &f.embed_url)
    }

    /// Adds `--rerank-api-url <embed server> --rerank-model hash-rerank`.
    pub fn with_rerank(self, rerank_url: &str) -> Self {
        self.args(["--rerank-api-url", rerank_url, "--rerank-model", "hash-rerank"])
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// How long to wait for one response (default 60 s) or, for [`Server::output`], for the exit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    fn command(&self, extra_args: &[String]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(server_bin());
        cmd.args(&self.args).args(extra_args);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("CHROMA_REPO_SEARCH_") || k.starts_with("MCP_CHROMADB_REPO_SEARCH_") {
                cmd.env_remove(&key);
            }
        }
        // What reaches stderr is pinned: the runner's log filter must not change it.
        cmd.env_remove("RUST_LOG");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.kill_on_drop(true);
        cmd
    }

    fn response_timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_RESPONSE_TIMEOUT)
    }

    /// Runs the binary to completion with `stdin` as its input (closed afterwards).
    pub async fn output_with_stdin(&self, stdin: &str) -> Output {
        let mut cmd = self.command(&[]);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", server_bin().display()));
        let mut input = child.stdin.take().expect("stdin");
        let data = stdin.as_bytes().to_vec();
        let writer = tokio::spawn(async move {
            let _ = input.write_all(&data).await;
            drop(input);
        });
        let out = tokio::time::timeout(self.response_timeout(), child.wait_with_output())
            .await
            .unwrap_or_else(|_| {
                panic!("{} {:?} did not exit within {:?}", server_bin().display(), self.args, self.response_timeout())
            })
            .expect("wait for the binary");
        let _ = writer.await;
        out
    }

    /// Runs the binary to completion with an empty, closed stdin (start-up errors, `--version`).
    pub async fn output(&self) -> Output {
        self.output_with_stdin("").await
    }

    /// Spawns the binary in stdio mode with piped stdin, stdout and stderr.
    /// The child, its stderr as read so far, and the task reading it (done at EOF).
    fn spawn_stdio(&self) -> (tokio::process::Child, Arc<Mutex<String>>, JoinHandle<()>) {
        let mut cmd = self.command(&[]);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", server_bin().display()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let reader = collect_text(child.stderr.take().expect("stderr"), stderr.clone());
        (child, stderr, reader)
    }

    /// Spawns the binary in stdio mode and opens an rmcp client session with it (initialised).
    pub async fn stdio(&self) -> McpClient {
        let (mut child, stderr, stderr_reader) = self.spawn_stdio();
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        // rmcp reads the server's stdout through a pipe of our own, so that the lines as written
        // stay available to the tests that pin them.
        let (client_read, mut tee) = tokio::io::duplex(1 << 20);
        let stdout_lines = Arc::new(Mutex::new(Vec::new()));
        let lines = stdout_lines.clone();
        let stdout_reader = tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            let mut teeing = true;
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_string();
                        lines.lock().unwrap().push(line);
                        // Once the client has gone, the lines are still recorded to the end.
                        teeing = teeing && tee.write_all(&buf).await.is_ok();
                    }
                }
            }
        });
        let timeout = self.response_timeout();
        let service = match tokio::time::timeout(timeout, ().serve((client_read, stdin))).await {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => panic!("initialize failed: {e}; stderr:\n{}", stderr.lock().unwrap()),
            Err(_) => panic!("no initialize answer within {timeout:?}; stderr:\n{}", stderr.lock().unwrap()),
        };
        McpClient {
            session: Session { service: Some(service), timeout, stderr },
            child,
            stdout_lines,
            readers: vec![stdout_reader, stderr_reader],
        }
    }

    /// Spawns the binary in stdio mode for raw newline-delimited JSON-RPC: see [`RawStdio`].
    pub async fn raw_stdio(&self) -> RawStdio {
        let (mut child, stderr, stderr_reader) = self.spawn_stdio();
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let stdout_lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::unbounded_channel();
        let lines = stdout_lines.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                lines.lock().unwrap().push(line.clone());
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        RawStdio {
            child,
            stdin: Some(stdin),
            rx,
            pending: HashMap::new(),
            stdout_lines,
            stderr,
            stderr_reader: Some(stderr_reader),
            next_id: 1,
            timeout: self.response_timeout(),
        }
    }

    /// Spawns the binary with `--http 127.0.0.1:<free port>` and waits until the port accepts.
    pub async fn http(&self) -> McpHttp {
        let mut last_stderr = String::new();
        for _attempt in 0..3 {
            let port = free_port();
            let addr = format!("127.0.0.1:{port}");
            let mut cmd = self.command(&["--http".to_string(), addr.clone()]);
            cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
            let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", server_bin().display()));
            let stderr = Arc::new(Mutex::new(String::new()));
            collect_text(child.stderr.take().expect("stderr"), stderr.clone());
            let log_lines = Arc::new(Mutex::new(Vec::new()));
            collect_lines(child.stdout.take().expect("stdout"), log_lines.clone());
            let started = Instant::now();
            loop {
                if tokio::net::TcpStream::connect(&addr).await.is_ok() {
                    return McpHttp {
                        child,
                        base_url: format!("http://{addr}"),
                        client: reqwest::Client::new(),
                        stdout_lines: log_lines,
                        stderr,
                        timeout: self.response_timeout(),
                    };
                }
                if let Ok(Some(status)) = child.try_wait() {
                    tokio::time::sleep(Duration::from_millis(50)).await; // let stderr drain
                    last_stderr = format!("exited with {status}; stderr:\n{}", stderr.lock().unwrap());
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "the server did not listen on {addr} within 30 s; stderr:\n{}",
                    stderr.lock().unwrap()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        panic!("the HTTP server did not start (3 attempts): {last_stderr}");
    }
}

fn collect_text(pipe: impl AsyncRead + Unpin + Send + 'static, into: Arc<Mutex<String>>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => into.lock().unwrap().push_str(&String::from_utf8_lossy(&buf)),
            }
        }
    })
}

fn collect_lines(pipe: impl AsyncRead + Unpin + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
    tokio::spawn(async move {
        let mut reader = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            into.lock().unwrap().push(line);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// rmcp's client: what a tool-calling client observes
// ---------------------------------------------------------------------------------------------

/// An initialised rmcp client session, over stdio ([`McpClient`]) or Streamable HTTP
/// ([`McpHttp::client`]). Results come back as JSON, as rmcp decoded them.
pub struct Session {
    service: Option<RunningService<RoleClient, ()>>,
    timeout: Duration,
    stderr: Arc<Mutex<String>>,
}

impl Session {
    /// The rmcp peer, for calls these helpers do not wrap.
    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.as_ref().expect("the session is open").peer()
    }

    /// Sends one request; returns its JSON-RPC id and rmcp's answer (a JSON-RPC error included).
    pub async fn send(&self, request: ClientRequest) -> (Value, Result<ServerResult, rmcp::ServiceError>) {
        let handle = self
            .peer()
            .send_request_with_option(request, PeerRequestOptions::with_timeout(self.timeout))
            .await
            .unwrap_or_else(|e| panic!("send the request: {e}; stderr:\n{}", self.stderr()));
        let id = json!(handle.id);
        (id, handle.await_response().await)
    }

    /// A request rmcp has no typed form for (any method, any params).
    pub fn custom(method: &str, params: Value) -> ClientRequest {
        ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(method, Some(params)))
    }

    /// `tools/call` with `arguments` (an object, or `null` to send none); the result as JSON.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Value {
        self.call_tool_id(name, arguments).await.1
    }

    /// [`Session::call_tool`], with the request's JSON-RPC id.
    pub async fn call_tool_id(&self, name: &str, arguments: Value) -> (Value, Value) {
        let mut params = CallToolRequestParams::new(name.to_string());
        match arguments {
            Value::Object(map) => params = params.with_arguments(map),
            Value::Null => {}
            other => panic!("tool arguments are an object or null, not {other}"),
        }
        let (id, answer) = self.send(ClientRequest::CallToolRequest(rmcp::model::Request::new(params))).await;
        match answer {
            Ok(ServerResult::CallToolResult(result)) => (id, json!(result)),
            Ok(other) => panic!("tools/call {name}: not a tool result: {}", json!(other)),
            Err(e) => panic!("tools/call {name} failed: {e}; stderr:\n{}", self.stderr()),
        }
    }

    /// `tools/list`; the result (`{"tools": [...]}`) as JSON.
    pub async fn list_tools(&self) -> Value {
        let request = ClientRequest::ListToolsRequest(rmcp::model::RequestOptionalParam::default());
        match self.send(request).await.1 {
            Ok(result) => json!(result),
            Err(e) => panic!("tools/list failed: {e}; stderr:\n{}", self.stderr()),
        }
    }

    /// `ping`; panics unless it is answered with an empty result.
    pub async fn ping(&self) {
        let request = ClientRequest::PingRequest(rmcp::model::RequestNoParam::default());
        match self.send(request).await.1 {
            Ok(ServerResult::EmptyResult(_)) => {}
            other => panic!("ping: {other:?}; stderr:\n{}", self.stderr()),
        }
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Ends the session: rmcp closes its side of the transport.
    pub async fn cancel(&mut self) {
        if let Some(service) = self.service.take() {
            let _ = service.cancel().await;
        }
    }
}

/// The binary in stdio mode with rmcp's client on its stdin and stdout, as an MCP host spawns it.
///
/// rmcp's child-process transport is the same framing over the same pipes, but it reaps the child
/// itself, and these tests pin the exit status after EOF and the lines on stdout: so the client
/// runs over the pipes directly.
pub struct McpClient {
    session: Session,
    child: tokio::process::Child,
    stdout_lines: Arc<Mutex<Vec<String>>>,
    /// The tasks reading stdout and stderr, done at EOF: [`McpClient::close`] waits for them.
    readers: Vec<JoinHandle<()>>,
}

impl std::ops::Deref for McpClient {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl McpClient {
    /// Every line the server wrote to stdout so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout_lines.lock().unwrap().clone()
    }

    /// The stdout line that answered request `id`, parsed (exactly one must).
    pub fn frame(&self, id: &Value) -> Value {
        let lines = self.stdout_lines();
        let found: Vec<Value> = lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("id") == Some(id) && (v.get("result").is_some() || v.get("error").is_some()))
            .collect();
        assert_eq!(found.len(), 1, "exactly one frame answers id {id}; stdout: {lines:#?}");
        found.into_iter().next().unwrap()
    }

    /// Sends `method` with `params` and returns the frame that answered it, as written.
    pub async fn request_frame(&self, method: &str, params: Value) -> Value {
        let (id, answer) = self.send(Session::custom(method, params)).await;
        if let Err(e @ (rmcp::ServiceError::TransportClosed | rmcp::ServiceError::Timeout { .. })) = answer {
            panic!("{method}: {e}; stderr:\n{}", self.stderr());
        }
        self.frame(&id)
    }

    /// `tools/call`; the frame as written and the result as rmcp decoded it.
    pub async fn call_tool_frame(&self, name: &str, arguments: Value) -> (Value, Value) {
        let (id, result) = self.call_tool_id(name, arguments).await;
        (self.frame(&id), result)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Ends the session (EOF on the server's stdin) and waits for the exit.
    /// Ends the session and waits for the exit, and for stdout and stderr to be read to their
    /// end: what the tests read of them afterwards is complete.
    pub async fn close(&mut self) -> ExitStatus {
        self.session.cancel().await;
        let timeout = self.session.timeout;
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the server did not exit within {timeout:?} after EOF on stdin"))
            .expect("wait for the server");
        for reader in self.readers.drain(..) {
            assert!(tokio::time::timeout(timeout, reader).await.is_ok(), "output stayed open after the exit");
        }
        status
    }
}

// ---------------------------------------------------------------------------------------------
// The raw wire, for what no client sends
// ---------------------------------------------------------------------------------------------

/// The binary in stdio mode with newline-delimited JSON-RPC written and read by hand.
///
/// Only for tests that must send what a client never would — malformed JSON, non-UTF-8 bytes,
/// oversized frames, ids and protocol versions outside rmcp's types, requests before
/// `initialize`, EOF with requests in flight — or that pin exact envelopes with the ids they
/// chose. Everything else goes through rmcp's client ([`Server::stdio`]).
pub struct RawStdio {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    rx: mpsc::UnboundedReceiver<String>,
    /// Responses read while waiting for another id, by id.
    pending: HashMap<String, Value>,
    stdout_lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
    /// The task reading stderr, done at EOF: [`RawStdio::close`] waits for it.
    stderr_reader: Option<JoinHandle<()>>,
    next_id: u64,
    timeout: Duration,
}

impl RawStdio {
    /// Writes one line of raw bytes (a newline is appended).
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin was closed");
        let mut data = bytes.to_vec();
        data.push(b'\n');
        stdin.write_all(&data).await.expect("write to the server's stdin");
        stdin.flush().await.expect("flush the server's stdin");
    }

    /// Writes one line (a newline is appended).
    pub async fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes()).await
    }

    /// Writes one JSON-RPC message.
    pub async fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string()).await
    }

    /// Sends a request with a fresh numeric id (1, 2, …) and returns that id without waiting.
    pub async fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        id
    }

    /// Sends a notification (no id, no response).
    pub async fn notify(&mut self, method: &str, params: Option<Value>) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            msg["params"] = params;
        }
        self.send(&msg).await
    }

    /// Waits for the response (the whole JSON-RPC object) with this id.
    pub async fn wait_response(&mut self, id: &Value) -> Value {
        let key = id.to_string();
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            if let Some(resp) = self.pending.remove(&key) {
                return resp;
            }
            let line = match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(line)) => line,
                Ok(None) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    panic!("the server closed stdout before answering id {key}; stderr:\n{}", self.stderr())
                }
                Err(_) => panic!("no response to id {key} within {:?}; stderr:\n{}", self.timeout, self.stderr()),
            };
            if let Ok(msg) = serde_json::from_str::<Value>(&line)
                && msg.get("id").is_some()
                && (msg.get("result").is_some() || msg.get("error").is_some())
            {
                self.pending.insert(msg["id"].to_string(), msg);
            }
        }
    }

    /// Sends a request and waits for its response (the whole JSON-RPC object).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.wait_response(&id).await
    }

    /// `initialize` (id 1 on a fresh session) followed by `notifications/initialized`.
    pub async fn initialize(&mut self) -> Value {
        let resp = self.request("initialize", initialize_params()).await;
        let result = resp.get("result").cloned().unwrap_or_else(|| panic!("initialize failed: {resp}"));
        self.notify("notifications/initialized", None).await;
        result
    }

    /// Every line the server wrote to stdout so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout_lines.lock().unwrap().clone()
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes stdin (EOF) and waits for the exit, and for everything written before it to be
    /// read (the readers end at EOF): [`RawStdio::stdout_lines`] and [`RawStdio::stderr`] are
    /// then complete.
    pub async fn close(&mut self) -> ExitStatus {
        self.stdin.take();
        let status = tokio::time::timeout(self.timeout, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the server did not exit within {:?} after EOF on stdin", self.timeout))
            .expect("wait for the server");
        let drained = tokio::time::timeout(self.timeout, async {
            while let Some(line) = self.rx.recv().await {
                if let Ok(msg) = serde_json::from_str::<Value>(&line)
                    && let Some(id) = msg.get("id")
                {
                    self.pending.insert(id.to_string(), msg);
                }
            }
        })
        .await;
        assert!(drained.is_ok(), "stdout stayed open {:?} after the server exited", self.timeout);
        if let Some(reader) = self.stderr_reader.take() {
            assert!(tokio::time::timeout(self.timeout, reader).await.is_ok(), "stderr stayed open after the exit");
        }
        status
    }
}

/// One HTTP response from `/mcp`, as it came.
#[derive(Debug)]
pub struct HttpReply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl HttpReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The JSON-RPC messages of a JSON response body (one object, or a batch).
pub fn json_messages(body: &str) -> Vec<Value> {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Array(items)) => items,
        Ok(v) => vec![v],
        Err(e) => panic!("not JSON ({e}): {body}"),
    }
}

/// The binary in Streamable HTTP mode on a free loopback port: rmcp's client through
/// [`McpHttp::client`], and raw POSTs for the tests that pin statuses, headers, envelopes and the
/// log lines of hand-made requests.
pub struct McpHttp {
    child: tokio::process::Child,
    base_url: String,
    client: reqwest::Client,
    stdout_lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
    timeout: Duration,
}

impl McpHttp {
    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("{}/mcp", self.base_url)
    }

    /// An initialised rmcp client session over Streamable HTTP.
    pub async fn client(&self) -> Session {
        self.client_with(StreamableHttpClientTransportConfig::with_uri(self.url())).await
    }

    /// [`McpHttp::client`] sending `Authorization: Bearer <token>` with every request.
    pub async fn client_with_bearer(&self, token: &str) -> Session {
        self.client_with(StreamableHttpClientTransportConfig::with_uri(self.url()).auth_header(token)).await
    }

    async fn client_with(&self, config: StreamableHttpClientTransportConfig) -> Session {
        let transport = StreamableHttpClientTransport::from_config(config);
        let service = match tokio::time::timeout(self.timeout, ().serve(transport)).await {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => panic!("initialize over HTTP failed: {e}; stderr:\n{}", self.stderr()),
            Err(_) => panic!("no initialize answer within {:?}; stderr:\n{}", self.timeout, self.stderr()),
        };
        Session { service: Some(service), timeout: self.timeout, stderr: self.stderr.clone() }
    }

    /// POSTs `body` to `/mcp` with the MCP headers; returns the reply as is.
    pub async fn post(&self, body: &Value) -> HttpReply {
        let resp = self
            .client
            .post(self.url())
            .timeout(self.timeout)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST /mcp: {e}; stderr:\n{}", self.stderr()));
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.expect("read /mcp response body");
        HttpReply { status, headers, body }
    }

    /// POSTs a notification; returns the HTTP reply (202 Accepted expected).
    pub async fn notify(&self, method: &str) -> HttpReply {
        self.post(&json!({"jsonrpc": "2.0", "method": method})).await
    }

    /// Any request to any path, for 404 checks and the like.
    pub async fn raw(&self, method: reqwest::Method, path: &str, body: Option<String>) -> (u16, String) {
        let mut req = self.client.request(method, format!("{}{path}", self.base_url)).timeout(self.timeout);
        if let Some(body) = body {
            req = req.header("Content-Type", "application/json").body(body);
        }
        let resp = req.send().await.expect("HTTP request");
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    /// The raw lines the server wrote to stdout so far (one JSON log object per HTTP request).
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout_lines.lock().unwrap().clone()
    }

    /// The stdout lines parsed as JSON; panics on a line that is not JSON.
    pub fn logs(&self) -> Vec<Value> {
        self.stdout_lines()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}")))
            .collect()
    }

    /// Waits until at least `n` log lines were written (a line may follow the response), then returns all.
    pub async fn wait_logs(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.stdout_lines.lock().unwrap().len() < n {
            assert!(
                Instant::now() < deadline,
                "expected {n} log lines, got {:?}; stderr:\n{}",
                self.stdout_lines(),
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.logs()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Stops the server.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Independent expectations: Chroma's raw answer and the contract's selection rules
// ---------------------------------------------------------------------------------------------

/// `POST .../collections/<id>/query` with optional `where` / `where_document`, exactly as the
/// contract (§2, pipeline step 3) describes the reference server's request.
pub async fn chroma_query_filtered(
    chroma_url: &str,
    collection_id: &str,
    embedding: &[f64],
    n_results: usize,
    where_: Option<Value>,
    where_document: Option<Value>,
) -> Value {
    let url = format!("{}/{collection_id}/query", collections_url(chroma_url, TENANT, DATABASE));
    let mut body = json!({
        "query_embeddings": [embedding],
        "n_results": n_results,
        "include": ["documents", "metadatas", "distances"],
    });
    if let Some(w) = where_ {
        body["where"] = w;
    }
    if let Some(w) = where_document {
        body["where_document"] = w;
    }
    send_json(reqwest::Client::new().post(url).json(&body), "filtered query").await
}

/// One candidate of a raw Chroma query result (the first query's row).
#[derive(Debug, Clone, PartialEq)]
pub struct RawCandidate {
    pub id: String,
    pub document: String,
    pub metadata: Value,
}

impl RawCandidate {
    fn meta_str(&self, key: &str) -> &str {
        self.metadata[key].as_str().unwrap_or("")
    }

    /// `org/repo@branch`, as the `**Repo:**` line shows it.
    pub fn repo(&self) -> String {
        format!("{}/{}@{}", self.meta_str("organization"), self.meta_str("repository"), self.meta_str("branch"))
    }

    /// `path[#L<start>[-L<end>]]`, as the `**File:**` line shows it (CONTRACT §3).
    pub fn file(&self) -> String {
        let start = self.metadata["start_line"].as_i64().unwrap_or(0);
        let end = self.metadata["end_line"].as_i64().unwrap_or(0);
        let mut out = self.meta_str("path").to_string();
        if start > 0 {
            out.push_str(&format!("#L{start}"));
            if end > start {
                out.push_str(&format!("-L{end}"));
            }
        }
        out
    }

    /// The file a per-file cap counts against: `org/repo@branch:path`.
    pub fn file_key(&self) -> String {
        format!("{}:{}", self.repo(), self.meta_str("path"))
    }

    /// The document without the indexer's prefix ("cleaned body", CONTRACT §2).
    pub fn body(&self) -> String {
        contract_clean_body(&self.document)
    }

    /// What the reranker is sent for this candidate (CONTRACT §2, pipeline step 4).
    pub fn rerank_document(&self) -> String {
        format!("Repository: {}\nFile: {}\n\n{}", self.repo(), self.file(), self.body())
    }
}

/// CONTRACT §2 "Prefix removal", written out again here so tests do not lean on our crates.
pub fn contract_clean_body(document: &str) -> String {
    let trimmed = document.trim();
    if trimmed.starts_with("Source: ")
        && let Some(at) = trimmed.find("\n\n")
    {
        return trimmed[at + 2..].trim().to_string();
    }
    trimmed.to_string()
}

/// The candidates of a raw Chroma `query` answer, in Chroma's order.
pub fn raw_candidates(raw: &Value) -> Vec<RawCandidate> {
    let ids = raw["ids"][0].as_array().unwrap_or_else(|| panic!("no ids in Chroma answer: {raw}"));
    ids.iter()
        .enumerate()
        .map(|(i, id)| RawCandidate {
            id: id.as_str().expect("id is a string").to_string(),
            document: raw["documents"][0][i].as_str().unwrap_or("").to_string(),
            metadata: raw["metadatas"][0][i].clone(),
        })
        .collect()
}

/// The outcome of the contract's selection over relevance-ordered candidates.
#[derive(Debug, Clone)]
pub struct Expected {
    pub selected: Vec<RawCandidate>,
    /// How many empty or repeated bodies were dropped.
    pub dropped_duplicates: usize,
    /// How many candidates the per-file cap deferred (whether or not they were used later).
    pub deferred: usize,
    /// How many deferred candidates filled remaining slots.
    pub filled_from_deferred: usize,
}

impl Expected {
    /// `(repo, file)` per selected result, as the Markdown shows them.
    pub fn shown(&self) -> Vec<(String, String)> {
        self.selected.iter().map(|c| (c.repo(), c.file())).collect()
    }

    pub fn ids(&self) -> Vec<String> {
        self.selected.iter().map(|c| c.id.clone()).collect()
    }
}

/// CONTRACT §2 step 5, written out independently: drop empty and repeated bodies, at most two per
/// file at first, stop at `limit`, then fill from the deferred ones in order.
pub fn contract_select(candidates: &[RawCandidate], limit: usize) -> Expected {
    let mut seen = std::collections::HashSet::new();
    let mut per_file: HashMap<String, usize> = HashMap::new();
    let mut selected = Vec::new();
    let mut deferred = Vec::new();
    let mut dropped = 0;
    for c in candidates {
        if selected.len() == limit {
            break;
        }
        let body = c.body();
        if body.is_empty() || !seen.insert(body) {
            dropped += 1;
            continue;
        }
        let n = per_file.entry(c.file_key()).or_insert(0);
        if *n >= 2 {
            deferred.push(c.clone());
            continue;
        }
        *n += 1;
        selected.push(c.clone());
    }
    let deferred_count = deferred.len();
    let room = limit - selected.len();
    let fill: Vec<RawCandidate> = deferred.into_iter().take(room).collect();
    let filled = fill.len();
    selected.extend(fill);
    Expected { selected, dropped_duplicates: dropped, deferred: deferred_count, filled_from_deferred: filled }
}

/// `(repo, file)` of every result in a rendered search answer, in order, read from its
/// `**Repo:**` and `**File:**` lines.
pub fn shown_results(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut repo = None;
    for line in markdown.lines() {
        if let Some(r) = line.strip_prefix("**Repo:** `").and_then(|r| r.strip_suffix('`')) {
            repo = Some(r.to_string());
        } else if let Some(f) = line.strip_prefix("**File:** `").and_then(|f| f.strip_suffix('`')) {
            out.push((repo.take().expect("a **File:** line follows a **Repo:** line"), f.to_string()));
        }
    }
    out
}

/// The summary line the contract prescribes for `n` results (n ≥ 1).
pub fn found_line(n: usize) -> String {
    let plural = if n == 1 { "" } else { "s" };
    format!("Found {n} relevant repository excerpt{plural}, ranked by semantic relevance.")
}

/// The no-match texts of CONTRACT §3.
pub const NO_MATCH: &str = "No relevant repository content was found. Try a broader or more specific query.";
pub const NO_MATCH_WITH_SOURCE: &str = "No relevant repository content was found. Try a broader or more specific query, or omit `source` to search all indexed repositories.";

/// The line Go's `fmt.Sprintf("%s version v%s (%s/%s)")` style gives for this build.
pub fn expected_version_line() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("repo-retriever version v{} ({}/{arch})", env!("CARGO_PKG_VERSION"), std::env::consts::OS)
}

// ---------------------------------------------------------------------------------------------
// JSON key order (serde_json's Value forgets it)
// ---------------------------------------------------------------------------------------------

/// A JSON value whose objects keep their key order.
#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    Object(Vec<(String, Ordered)>),
    Array(Vec<Ordered>),
    Scalar(Value),
}

impl Ordered {
    pub fn parse(text: &str) -> Ordered {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// The keys of an object, in order (empty for anything else).
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Ordered::Object(entries) => entries.iter().map(|(k, _)| k.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(json!(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(json!(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(json!(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::String(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::String(v)))
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Ordered::Array(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Ordered>()? {
                    entries.push((k, v));
                }
                Ok(Ordered::Object(entries))
            }
        }
        d.deserialize_any(V)
    }
}

// ---------------------------------------------------------------------------------------------
// A recording HTTP proxy (or fake) to stand between the server and a backend
// ---------------------------------------------------------------------------------------------

/// A recording HTTP proxy (or fake) between the server and a backend.
pub use rr_http::test_util::Recorder;

// ---------------------------------------------------------------------------------------------
// In process: rmcp's client over a pipe to the server's stdio transport
// ---------------------------------------------------------------------------------------------

/// An rmcp client session with `server`, served in this process by `rr_mcp::stdio` over an
/// in-memory pipe (the same framing as the binary's stdin and stdout).
pub async fn in_process(server: rr_mcp::McpServer) -> RunningService<RoleClient, ()> {
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_end);
    tokio::spawn(rr_mcp::stdio::serve_io(server, server_read, server_write));
    ().serve(tokio::io::split(client_end)).await.expect("initialize the in-process MCP session")
}

/// The JSON-RPC error of a failed rmcp client call.
pub fn rpc_error(error: rmcp::ServiceError) -> rmcp::ErrorData {
    match error {
        rmcp::ServiceError::McpError(e) => e,
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}
