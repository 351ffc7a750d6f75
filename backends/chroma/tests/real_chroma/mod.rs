//! The indexer's writes against a real Chroma 1.5.9: the fixture corpus,
//! built by `rr-indexer` and synced with the hash embedder, must read back as
//! the 89 records the reference indexer wrote (`testdata/records.jsonl`);
//! a second sync writes nothing; a re-sync of one namespace leaves another
//! namespace of the same collection as it was.
//!
//! Chroma is started once per test binary, as `server/tests/support` does:
//! `CHROMA_URL` adopts a running server; else `CHROMA_BIN`, else
//! `<workspace>/.venv/bin/chroma`, else `chroma` on `PATH` is run on a free
//! port under a small shell watchdog that stops it (and removes its data
//! folder) once this test process is gone. Without any of them the tests
//! fail, saying how to install it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rr_chroma::{ChromaConfig, ChromaStore};
use rr_core::{BackendError, CallContext, EmbeddedChunk, Embedder, IndexStore};
use rr_hash_embed::HashEmbedder;
use rr_http::HttpClient;
use rr_http::test_util::{instant_client, settings};
use rr_indexer::{Identity, IndexOptions, SyncOptions, SyncSummary, build, sync_build};
use serde_json::{Value, json};

const TENANT: &str = "default_tenant";
const DATABASE: &str = "default_database";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

// ---------------------------------------------------------------------------
// Starting Chroma
// ---------------------------------------------------------------------------

/// Runs `"$@"` in the background and stops it once `$RR_WATCH_PID` is gone.
const WATCHDOG: &str = r#"
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while kill -0 "$RR_WATCH_PID" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.5; done
kill -TERM "$child" 2>/dev/null
i=0
while kill -0 "$child" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i+1)); done
kill -KILL "$child" 2>/dev/null
wait "$child" 2>/dev/null
rc=$?
if [ -n "$RR_CLEANUP_DIR" ]; then rm -rf "$RR_CLEANUP_DIR"; fi
exit "$rc"
"#;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

fn chroma_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CHROMA_BIN").filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "CHROMA_BIN={} does not exist", bin.display());
        return bin;
    }
    let venv = workspace_root().join(".venv/bin/chroma");
    if venv.is_file() {
        return venv;
    }
    find_on_path("chroma").unwrap_or_else(|| {
        panic!(
            "these tests need a real Chroma 1.5.9 server and found none.\n\
             Run `bash scripts/test` (it creates .venv and installs it), or install it yourself:\n\
             \x20   python3 -m venv .venv && .venv/bin/pip install chromadb==1.5.9\n\
             then set CHROMA_BIN=/path/to/chroma (or CHROMA_URL=http://host:port for a running server)."
        )
    })
}

/// A plain HTTP/1.1 GET on loopback; the status, if anything answered.
fn status_of(port: u16, path: &str) -> Option<u16> {
    let timeout = Duration::from_secs(2);
    let mut stream = TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).ok()?;
    String::from_utf8_lossy(&buf).split_whitespace().nth(1)?.parse().ok()
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The watchdog wrappers of started servers (a static is never dropped).
static WRAPPERS: Mutex<Vec<Child>> = Mutex::new(Vec::new());

fn start_chroma() -> String {
    if let Some(url) = std::env::var("CHROMA_URL").ok().filter(|v| !v.is_empty()) {
        return url.trim_end_matches('/').to_owned();
    }
    let bin = chroma_bin();
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("rr-chroma-writes-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("chroma-writes.log");
    let mut failure = String::new();
    for _ in 0..3 {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let out = std::fs::File::create(&log).unwrap();
        let mut wrapper = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("sh")
            .arg(&bin)
            .args(["run", "--path"])
            .arg(dir.join("data"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("RR_WATCH_PID", std::process::id().to_string())
            .env("RR_CLEANUP_DIR", &dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn sh for {}: {e}", bin.display()));
        let started = Instant::now();
        loop {
            if status_of(port, "/api/v2/heartbeat") == Some(200) {
                // Kept, never waited for: the watchdog owns the lifetime from here on.
                WRAPPERS.lock().unwrap_or_else(PoisonError::into_inner).push(wrapper);
                return format!("http://127.0.0.1:{port}");
            }
            if let Ok(Some(status)) = wrapper.try_wait() {
                failure = format!("{} exited during start-up ({status})", bin.display());
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "Chroma ({}) did not answer on port {port} within 60 s; log {}:\n{}",
                bin.display(),
                log.display(),
                tail(&log)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!("{failure}; gave up after 3 attempts; log {}:\n{}", log.display(), tail(&log));
}

/// The Chroma of this test binary; a failed start-up is remembered, so every
/// test fails at once with the same message.
fn chroma_url() -> &'static str {
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    let url = URL.get_or_init(|| {
        std::panic::catch_unwind(start_chroma).map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()
        })
    });
    match url {
        Ok(url) => url,
        Err(message) => panic!("Chroma could not be started (first failure, remembered):\n{message}"),
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A collection name no other test (or earlier run against `CHROMA_URL`) uses.
fn fresh_collection(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    format!("rr-{what}-{}-{stamp}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

fn store(collection: &str) -> ChromaStore {
    ChromaStore::new(
        ChromaConfig {
            server_url: chroma_url().to_owned(),
            tenant: TENANT.into(),
            database: DATABASE.into(),
            collection_name: collection.into(),
            bearer_token: None,
        },
        instant_client(settings(3)),
    )
}

fn http() -> HttpClient {
    instant_client(settings(1))
}

fn collections_url() -> String {
    format!("{}/api/v2/tenants/{TENANT}/databases/{DATABASE}/collections", chroma_url())
}

async fn collection(name: &str) -> Value {
    http().get_json("test lookup", &format!("{}/{name}", collections_url()), None).await.expect("collection lookup")
}

/// Every record of the collection (optionally of one namespace), by id.
async fn read_back(name: &str, namespace_id: Option<&str>) -> BTreeMap<String, Value> {
    let id = collection(name).await["id"].as_str().unwrap().to_owned();
    let mut body = json!({"include": ["documents", "metadatas", "embeddings"]});
    if let Some(ns) = namespace_id {
        body["where"] = json!({"namespace_id": {"$eq": ns}});
    }
    let got: Value =
        http().post_json("test get", &format!("{}/{id}/get", collections_url()), &body, None).await.expect("get");
    let ids = got["ids"].as_array().unwrap();
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let record = json!({
                "id": id,
                "document": got["documents"][i],
                "metadata": got["metadatas"][i],
                "embedding": got["embeddings"][i],
            });
            (id.as_str().unwrap().to_owned(), record)
        })
        .collect()
}

fn fixture() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(workspace_root().join("testdata/records.jsonl")).expect("records.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_owned(), v)
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn identity(branch: &str) -> Identity {
    Identity::new("acme", "widgets", branch, COMMIT)
}

async fn index(store: &dyn IndexStore, embedder: &dyn Embedder, root: &Path, identity: &Identity) -> SyncSummary {
    let build = build(root, identity, &IndexOptions::default()).expect("build");
    sync_build(store, embedder, build, identity, &SyncOptions::default()).await.expect("sync")
}

/// Forwards to a store and counts writes.
struct Counting<'a> {
    inner: &'a dyn IndexStore,
    upserted: AtomicUsize,
    deleted: AtomicUsize,
}

impl<'a> Counting<'a> {
    fn new(inner: &'a dyn IndexStore) -> Self {
        Counting { inner, upserted: AtomicUsize::new(0), deleted: AtomicUsize::new(0) }
    }
}

#[async_trait]
impl IndexStore for Counting<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn max_batch_size(&self) -> usize {
        self.inner.max_batch_size()
    }
    async fn namespace_ids(&self, namespace_id: &str) -> Result<Vec<String>, BackendError> {
        self.inner.namespace_ids(namespace_id).await
    }
    async fn upsert(&self, records: &[EmbeddedChunk]) -> Result<(), BackendError> {
        self.upserted.fetch_add(records.len(), Ordering::SeqCst);
        self.inner.upsert(records).await
    }
    async fn delete(&self, ids: &[String]) -> Result<(), BackendError> {
        self.deleted.fetch_add(ids.len(), Ordering::SeqCst);
        self.inner.delete(ids).await
    }
}

/// The hash embedder, counting inputs.
#[derive(Default)]
struct CountingEmbedder {
    inner: HashEmbedder,
    inputs: Mutex<usize>,
}

#[async_trait]
impl Embedder for CountingEmbedder {
    fn name(&self) -> &str {
        "hash"
    }
    async fn embed(&self, inputs: &[String], ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        *self.inputs.lock().unwrap() += inputs.len();
        self.inner.embed(inputs, ctx).await
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[tokio::test]
async fn the_synced_corpus_reads_back_as_the_reference_records() {
    let name = fresh_collection("fixture");
    let chroma = store(&name);
    let embedder = CountingEmbedder::default();
    let main = identity("main");
    let corpus = workspace_root().join("testdata/corpus");

    let first = index(&chroma, &embedder, &corpus, &main).await;
    assert_eq!((first.chunks_desired, first.chunks_added_or_updated, first.chunks_deleted), (89, 89, 0));
    assert_eq!(chroma.max_batch_size(), 5461, "Chroma 1.5.9's pre-flight max_batch_size");

    // The collection is created as the reference creates it.
    let created = collection(&name).await;
    assert_eq!(created["metadata"], Value::Null);
    assert_eq!(created["configuration_json"]["embedding_function"], json!({"type": "legacy"}));
    assert_eq!(created["configuration_json"]["hnsw"]["space"], json!("l2"));

    let expected = fixture();
    let actual = read_back(&name, None).await;
    assert_eq!(actual.len(), 89);
    assert_eq!(actual.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "the ids");
    for (id, want) in &expected {
        let got = &actual[id];
        assert_eq!(got["document"], want["document"], "document of {id}");
        assert_eq!(got["metadata"], want["metadata"], "metadata of {id}");
        let (got_vec, want_vec) = (got["embedding"].as_array().unwrap(), want["embedding"].as_array().unwrap());
        assert_eq!(got_vec.len(), want_vec.len(), "embedding length of {id}");
        for (i, (g, w)) in got_vec.iter().zip(want_vec).enumerate() {
            let (g, w) = (g.as_f64().unwrap(), w.as_f64().unwrap());
            assert!((g - w).abs() <= 1e-6, "embedding of {id}[{i}]: {g} vs {w}");
        }
    }

    // A second sync over the same files writes and embeds nothing.
    let inputs = *embedder.inputs.lock().unwrap();
    let counting = Counting::new(&chroma);
    let second = index(&counting, &embedder, &corpus, &main).await;
    assert_eq!((second.chunks_added_or_updated, second.chunks_unchanged, second.chunks_deleted), (0, 89, 0));
    assert_eq!(counting.upserted.load(Ordering::SeqCst) + counting.deleted.load(Ordering::SeqCst), 0);
    assert_eq!(*embedder.inputs.lock().unwrap(), inputs);
    assert_eq!(read_back(&name, None).await, actual, "nothing changed");
}

#[tokio::test]
async fn a_dry_run_creates_nothing() {
    let name = fresh_collection("dry");
    let chroma = store(&name);
    let main = identity("main");
    let build = build(&workspace_root().join("testdata/corpus"), &main, &IndexOptions::default()).unwrap();
    let opts = SyncOptions { dry_run: true, ..SyncOptions::default() };
    let summary = sync_build(&chroma, &HashEmbedder::default(), build, &main, &opts).await.unwrap();
    assert_eq!((summary.chunks_added_or_updated, summary.dry_run), (89, true));
    let missing = http()
        .get_json::<Value>("test lookup", &format!("{}/{name}", collections_url()), None)
        .await
        .expect_err("the collection must not exist");
    assert_eq!(missing.status(), Some(404));
}

#[tokio::test]
async fn resyncing_one_namespace_leaves_the_other_untouched() {
    let name = fresh_collection("namespaces");
    let chroma = store(&name);
    let embedder = HashEmbedder::default();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace_root().join("testdata/corpus"), dir.path());
    let (main, release) = (identity("main"), identity("release"));

    index(&chroma, &embedder, dir.path(), &main).await;
    index(&chroma, &embedder, dir.path(), &release).await;
    let release_before = read_back(&name, Some(&release.namespace_id())).await;
    assert_eq!(release_before.len(), 89);
    assert_eq!(read_back(&name, None).await.len(), 178);

    // Edit one file, delete another, and re-sync main with small batches.
    let path = dir.path().join("internal/store/store.go");
    std::fs::write(&path, std::fs::read_to_string(&path).unwrap() + "\n// edited\n").unwrap();
    std::fs::remove_file(dir.path().join("docs/notes.txt")).unwrap();
    let build = build(dir.path(), &main, &IndexOptions::default()).unwrap();
    let wanted: BTreeSet<String> = build.records.iter().map(|r| r.id.clone()).collect();
    let opts = SyncOptions { batch_size: 3, ..SyncOptions::default() };
    let counting = Counting::new(&chroma);
    let summary = sync_build(&counting, &embedder, build, &main, &opts).await.unwrap();
    assert_eq!(summary.chunks_deleted, 7 + 5, "store.go's old chunks and notes.txt's");
    assert_eq!(counting.deleted.load(Ordering::SeqCst), 12);
    assert_eq!(counting.upserted.load(Ordering::SeqCst), summary.chunks_added_or_updated);

    let main_after = read_back(&name, Some(&main.namespace_id())).await;
    assert_eq!(main_after.keys().cloned().collect::<BTreeSet<_>>(), wanted);
    assert_eq!(read_back(&name, Some(&release.namespace_id())).await, release_before, "release changed");
}
