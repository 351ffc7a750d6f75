//! The indexer's writes against a real Chroma 1.5.9: the fixture corpus,
//! built by `rr-indexer` and synced with the hash embedder, must read back as
//! the 89 records the reference indexer wrote (`testdata/records.jsonl`);
//! a second sync writes nothing; a re-sync of one namespace leaves another
//! namespace of the same collection as it was.
//!
//! Chroma is started once per test binary by `rr-testkit`, as for the
//! server's tests: `CHROMA_URL` adopts a running server; else `CHROMA_BIN`,
//! else `<workspace>/.venv/bin/chroma`, else `chroma` on `PATH` is run on a
//! free port under a small shell watchdog that stops it (and removes its data
//! folder) once this test process is gone. Without any of them the tests
//! fail, saying how to install it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use rr_chroma::{ChromaConfig, ChromaStore};
use rr_core::{BackendError, CallContext, EmbeddedChunk, Embedder, IndexStore};
use rr_hash_embed::HashEmbedder;
use rr_http::HttpClient;
use rr_http::test_util::{instant_client, settings};
use rr_indexer::{Identity, IndexOptions, SyncOptions, SyncSummary, build, sync_build};
use rr_testkit::{copy_dir, fixture_records, workspace_root};
use serde_json::{Value, json};

const TENANT: &str = "default_tenant";
const DATABASE: &str = "default_database";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// The Chroma of this test binary, started on first use by the test kit; a
/// failed start-up is remembered, so every test fails at once with the same
/// message.
fn chroma_url() -> &'static str {
    rr_testkit::chroma(Path::new(env!("CARGO_TARGET_TMPDIR"))).url()
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

/// The reference indexer's records, by id.
fn fixture() -> BTreeMap<String, Value> {
    fixture_records().iter().map(|v| (v["id"].as_str().unwrap().to_owned(), v.clone())).collect()
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
