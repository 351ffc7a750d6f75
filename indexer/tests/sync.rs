//! Sync safety: idempotence, a one-file edit, namespace isolation,
//! no deletion after a failed write, batch limits and dry runs, against an
//! in-memory store that records every call and fails on demand, and once
//! against the real embedded store.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Chunk, EmbeddedChunk, Embedder, IndexStore};
use rr_hash_embed::HashEmbedder;
use rr_indexer::sync::{SyncPhase, SyncProgress};
use rr_indexer::{
    Build, Identity, IndexOptions, StreamSync, SyncError, SyncOptions, SyncSummary, build, build_stream, sync,
    sync_build,
};
use rr_testkit::copy_dir;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

// ---------------------------------------------------------------------------
// An in-memory store that records every call and injects faults
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    List(String),
    Upsert(Vec<String>),
    Delete(Vec<String>),
}

#[derive(Default)]
struct MemoryStore {
    records: Mutex<BTreeMap<String, EmbeddedChunk>>,
    calls: Mutex<Vec<Call>>,
    max_batch: usize,
    /// Fail the n-th upsert call (1-based), all or nothing, as the trait requires.
    fail_upsert_call: Option<usize>,
    upsert_calls: AtomicUsize,
    /// Accept upserts without storing them (a store that loses writes).
    drop_writes: bool,
}

impl MemoryStore {
    fn new(max_batch: usize) -> Self {
        MemoryStore { max_batch, ..MemoryStore::default() }
    }

    fn failing_upsert(max_batch: usize, call: usize) -> Self {
        MemoryStore { max_batch, fail_upsert_call: Some(call), ..MemoryStore::default() }
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn clear_calls(&self) {
        self.calls.lock().unwrap().clear();
    }

    fn writes(&self) -> Vec<Call> {
        self.calls().into_iter().filter(|c| !matches!(c, Call::List(_))).collect()
    }

    fn upserted(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| if let Call::Upsert(ids) = c { Some(ids) } else { None })
            .flatten()
            .collect()
    }

    fn deleted(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| if let Call::Delete(ids) = c { Some(ids) } else { None })
            .flatten()
            .collect()
    }

    /// The stored records of one namespace, by id.
    fn namespace(&self, namespace_id: &str) -> BTreeMap<String, EmbeddedChunk> {
        let records = self.records.lock().unwrap();
        records
            .iter()
            .filter(|(_, r)| r.chunk.metadata.namespace_id == namespace_id)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn len(&self) -> usize {
        self.records.lock().unwrap().len()
    }
}

#[async_trait]
impl IndexStore for MemoryStore {
    fn name(&self) -> &str {
        "memory"
    }

    fn max_batch_size(&self) -> usize {
        self.max_batch
    }

    async fn namespace_ids(&self, namespace_id: &str) -> Result<Vec<String>, BackendError> {
        self.calls.lock().unwrap().push(Call::List(namespace_id.to_owned()));
        Ok(self.namespace(namespace_id).into_keys().collect())
    }

    async fn upsert(&self, records: &[EmbeddedChunk]) -> Result<(), BackendError> {
        assert!(records.len() <= self.max_batch, "upsert of {} records, limit {}", records.len(), self.max_batch);
        self.calls.lock().unwrap().push(Call::Upsert(records.iter().map(|r| r.chunk.id.clone()).collect()));
        let n = self.upsert_calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_upsert_call == Some(n) {
            return Err(BackendError::new("memory", "memory upsert failed: injected fault"));
        }
        if !self.drop_writes {
            let mut stored = self.records.lock().unwrap();
            for record in records {
                stored.insert(record.chunk.id.clone(), record.clone());
            }
        }
        Ok(())
    }

    async fn delete(&self, ids: &[String]) -> Result<(), BackendError> {
        assert!(ids.len() <= self.max_batch, "delete of {} ids, limit {}", ids.len(), self.max_batch);
        self.calls.lock().unwrap().push(Call::Delete(ids.to_vec()));
        let mut stored = self.records.lock().unwrap();
        for id in ids {
            stored.remove(id);
        }
        Ok(())
    }
}

/// The hash embedder, counting calls and keeping every input.
#[derive(Default)]
struct CountingEmbedder {
    inner: HashEmbedder,
    calls: AtomicUsize,
    inputs: Mutex<Vec<String>>,
    fail: bool,
}

impl CountingEmbedder {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn inputs(&self) -> Vec<String> {
        self.inputs.lock().unwrap().clone()
    }
}

#[async_trait]
impl Embedder for CountingEmbedder {
    fn name(&self) -> &str {
        "counting-hash"
    }

    async fn embed(&self, inputs: &[String], ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inputs.lock().unwrap().extend(inputs.iter().cloned());
        if self.fail {
            return Err(BackendError::new("counting-hash", "embedding failed: injected fault"));
        }
        self.inner.embed(inputs, ctx).await
    }
}

// ---------------------------------------------------------------------------
// Corpus helpers
// ---------------------------------------------------------------------------

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/corpus")
}

/// A writable copy of `testdata/corpus`.
fn corpus_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&corpus(), dir.path());
    dir
}

fn main_identity() -> Identity {
    Identity::new("acme", "widgets", "main", COMMIT)
}

fn release_identity() -> Identity {
    Identity::new("acme", "widgets", "release", COMMIT)
}

fn built(root: &Path, identity: &Identity) -> Build {
    build(root, identity, &IndexOptions::default()).expect("build the corpus")
}

fn ids_of_path(records: &[Chunk], path: &str) -> BTreeSet<String> {
    records.iter().filter(|r| r.metadata.path == path).map(|r| r.id.clone()).collect()
}

async fn run(store: &dyn IndexStore, embedder: &dyn Embedder, root: &Path, identity: &Identity) -> SyncSummary {
    sync_build(store, embedder, built(root, identity), identity, &SyncOptions::default()).await.expect("sync")
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_second_run_over_unchanged_files_writes_and_embeds_nothing() {
    let store = MemoryStore::new(1000);
    let embedder = CountingEmbedder::default();
    let identity = main_identity();

    let first = run(&store, &embedder, &corpus(), &identity).await;
    assert_eq!(
        (first.chunks_desired, first.chunks_added_or_updated, first.chunks_unchanged, first.chunks_deleted),
        (89, 89, 0, 0)
    );
    assert_eq!(store.len(), 89);
    assert!(embedder.calls() > 0);

    store.clear_calls();
    let calls_before = embedder.calls();
    let second = run(&store, &embedder, &corpus(), &identity).await;
    assert_eq!(
        (second.chunks_desired, second.chunks_added_or_updated, second.chunks_unchanged, second.chunks_deleted),
        (89, 0, 89, 0)
    );
    assert_eq!(store.writes(), Vec::<Call>::new(), "the second run wrote");
    assert_eq!(embedder.calls(), calls_before, "the second run embedded");
    let namespace = identity.namespace_id();
    assert_eq!(store.calls(), vec![Call::List(namespace.clone()), Call::List(namespace)], "list, then verify");
}

#[tokio::test]
async fn the_summary_has_the_reference_keys_in_its_printed_order() {
    let store = MemoryStore::new(1000);
    let summary = run(&store, &HashEmbedder::default(), &corpus(), &main_identity()).await;
    assert_eq!(
        (summary.files_scanned, summary.files_eligible, summary.files_indexed, summary.files_binary_skipped),
        (17, 17, 15, 1),
        "{summary:?}"
    );
    assert_eq!(
        (summary.organization.as_str(), summary.repository.as_str(), summary.branch.as_str()),
        ("acme", "widgets", "main")
    );
    assert_eq!(summary.namespace_id, main_identity().namespace_id());
    let json: serde_json::Value = serde_json::from_str(&summary.to_json()).unwrap();
    let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "branch",
            "chunks_added_or_updated",
            "chunks_deleted",
            "chunks_desired",
            "chunks_unchanged",
            "dry_run",
            "duration_ms",
            "files_binary_skipped",
            "files_eligible",
            "files_ignored",
            "files_indexed",
            "files_other_skipped",
            "files_scanned",
            "files_unchanged",
            "namespace_id",
            "organization",
            "repository",
        ]
    );
    let text = summary.to_json();
    assert!(
        text.starts_with(r#"{"branch":"main","chunks_added_or_updated":89,"chunks_deleted":0,"chunks_desired":89,"#),
        "{text}"
    );
    assert!(text.contains(r#""dry_run":false,"#), "{text}");
}

#[tokio::test]
async fn editing_one_file_rewrites_only_its_records() {
    let dir = corpus_copy();
    let store = MemoryStore::new(1000);
    let embedder = CountingEmbedder::default();
    let identity = main_identity();
    let before = built(dir.path(), &identity);
    run(&store, &embedder, dir.path(), &identity).await;
    let stored_before = store.namespace(&identity.namespace_id());

    let edited = "internal/config/config.go";
    let path = dir.path().join(edited);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("package config", "package config // edited")).unwrap();
    let after = built(dir.path(), &identity);
    let old_ids = ids_of_path(&before.records, edited);
    let new_ids = ids_of_path(&after.records, edited);
    assert!(!old_ids.is_empty() && old_ids.is_disjoint(&new_ids), "the edit changes the file's ids");

    store.clear_calls();
    let inputs_before = embedder.inputs().len();
    let summary = run(&store, &embedder, dir.path(), &identity).await;
    assert_eq!(summary.chunks_added_or_updated, new_ids.len());
    assert_eq!(summary.chunks_deleted, old_ids.len());
    assert_eq!(summary.chunks_unchanged, 89 - old_ids.len());
    assert_eq!(store.upserted().into_iter().collect::<BTreeSet<_>>(), new_ids);
    assert_eq!(store.deleted().into_iter().collect::<BTreeSet<_>>(), old_ids);
    assert_eq!(embedder.inputs().len() - inputs_before, new_ids.len(), "only the edited file is embedded");

    let stored_after = store.namespace(&identity.namespace_id());
    for (id, record) in &stored_before {
        if !old_ids.contains(id) {
            assert_eq!(stored_after.get(id), Some(record), "record {id} of another file changed");
        }
    }
    let expected: BTreeSet<String> = after.records.iter().map(|r| r.id.clone()).collect();
    assert_eq!(stored_after.keys().cloned().collect::<BTreeSet<_>>(), expected);
}

#[tokio::test]
async fn another_namespace_in_the_same_store_is_never_touched() {
    let dir = corpus_copy();
    let store = MemoryStore::new(1000);
    let embedder = HashEmbedder::default();
    let (main, release) = (main_identity(), release_identity());
    run(&store, &embedder, dir.path(), &main).await;
    run(&store, &embedder, dir.path(), &release).await;
    assert_eq!(store.len(), 178);
    let release_before = store.namespace(&release.namespace_id());
    assert_eq!(release_before.len(), 89);

    // Edit one file and delete another, then re-sync main only.
    let path = dir.path().join("README.md");
    std::fs::write(&path, std::fs::read_to_string(&path).unwrap() + "\nOne more line.\n").unwrap();
    std::fs::remove_file(dir.path().join("src/lib.rs")).unwrap();
    store.clear_calls();
    let summary = run(&store, &embedder, dir.path(), &main).await;
    assert!(summary.chunks_added_or_updated > 0 && summary.chunks_deleted > 0, "{summary:?}");

    assert_eq!(store.namespace(&release.namespace_id()), release_before, "release changed");
    for call in store.calls() {
        match call {
            Call::List(ns) => assert_eq!(ns, main.namespace_id()),
            Call::Upsert(ids) | Call::Delete(ids) => {
                assert!(ids.iter().all(|id| !release_before.contains_key(id)), "a release id was written: {ids:?}")
            }
        }
    }
    let main_ids: BTreeSet<String> = built(dir.path(), &main).records.into_iter().map(|r| r.id).collect();
    assert_eq!(store.namespace(&main.namespace_id()).into_keys().collect::<BTreeSet<_>>(), main_ids);
}

#[tokio::test]
async fn a_failed_upsert_deletes_nothing_and_the_next_run_converges() {
    let dir = corpus_copy();
    let identity = main_identity();
    let embedder = HashEmbedder::default();
    let store = MemoryStore::failing_upsert(10, 2);
    // Seed the namespace with the corpus as it is, then make stale ids and new ones.
    {
        let seed = MemoryStore::new(1000);
        run(&seed, &embedder, dir.path(), &identity).await;
        *store.records.lock().unwrap() = seed.records.lock().unwrap().clone();
    }
    std::fs::remove_file(dir.path().join("docs/notes.txt")).unwrap();
    let changelog = dir.path().join("CHANGELOG.md");
    std::fs::write(&changelog, std::fs::read_to_string(&changelog).unwrap().replace("Changelog", "Change log"))
        .unwrap();
    let desired = built(dir.path(), &identity);
    let stored_before = store.namespace(&identity.namespace_id());

    let err = sync(&store, &embedder, desired.records.clone(), &identity.namespace_id(), &SyncOptions::default())
        .await
        .expect_err("the second upsert batch fails");
    assert!(matches!(err, SyncError::Upsert(_)), "{err:?}");
    assert_eq!(err.to_string(), "memory upsert failed: injected fault");
    assert_eq!(err.backend().map(|b| b.backend()), Some("memory"));
    assert_eq!(store.deleted(), Vec::<String>::new(), "a failed upsert must prevent every deletion");
    let upserts = store.calls().iter().filter(|c| matches!(c, Call::Upsert(_))).count();
    assert_eq!(upserts, 2, "sync stops at the failed batch");
    let stored = store.namespace(&identity.namespace_id());
    for id in stored_before.keys() {
        assert!(stored.contains_key(id), "stale id {id} was removed");
    }

    // Without the fault, the next run finishes the job: the first batch is
    // already there and counts as unchanged.
    let healthy = MemoryStore::new(10);
    *healthy.records.lock().unwrap() = store.records.lock().unwrap().clone();
    let summary = sync(&healthy, &embedder, desired.records.clone(), &identity.namespace_id(), &SyncOptions::default())
        .await
        .unwrap();
    assert!(summary.chunks_deleted > 0);
    let expected: BTreeSet<String> = desired.records.iter().map(|r| r.id.clone()).collect();
    assert_eq!(healthy.namespace(&identity.namespace_id()).into_keys().collect::<BTreeSet<_>>(), expected);
}

#[tokio::test]
async fn a_failed_embedding_writes_and_deletes_nothing() {
    let identity = main_identity();
    let store = MemoryStore::new(1000);
    store.records.lock().unwrap().insert(
        "stale".into(),
        EmbeddedChunk {
            chunk: Chunk {
                id: "stale".into(),
                metadata: built(&corpus(), &identity).records[0].metadata.clone(),
                ..Chunk::default()
            },
            embedding: vec![1.0],
        },
    );
    let embedder = CountingEmbedder { fail: true, ..CountingEmbedder::default() };
    let err = run_err(&store, &embedder, &identity).await;
    assert!(matches!(err, SyncError::Embed(_)), "{err:?}");
    assert_eq!(store.writes(), Vec::<Call>::new());
    assert_eq!(store.len(), 1);
}

async fn run_err(store: &MemoryStore, embedder: &dyn Embedder, identity: &Identity) -> SyncError {
    sync_build(store, embedder, built(&corpus(), identity), identity, &SyncOptions::default()).await.unwrap_err()
}

#[tokio::test]
async fn batches_never_exceed_the_option_or_the_store_limit() {
    let identity = main_identity();
    for (batch_size, store_max, expected) in [(10, 7, 7), (5, 1000, 5), (100, 1000, 100), (1, 3, 1)] {
        let store = MemoryStore::new(store_max);
        let embedder = CountingEmbedder::default();
        let opts = SyncOptions { batch_size, ..SyncOptions::default() };
        sync_build(&store, &embedder, built(&corpus(), &identity), &identity, &opts).await.unwrap();
        let sizes: Vec<usize> = store
            .calls()
            .into_iter()
            .filter_map(|c| if let Call::Upsert(ids) = c { Some(ids.len()) } else { None })
            .collect();
        assert_eq!(sizes.iter().sum::<usize>(), 89);
        assert!(sizes.iter().all(|&n| n <= expected), "batch {batch_size}, limit {store_max}: {sizes:?}");
        assert_eq!(sizes.len(), 89usize.div_ceil(expected), "batch {batch_size}, limit {store_max}: {sizes:?}");
        assert_eq!(embedder.calls(), sizes.len(), "one embedding call per upsert batch");

        // Delete everything: the deletions are batched the same way.
        store.clear_calls();
        let empty = Build { records: Vec::new(), ..Build::default() };
        let summary = sync_build(&store, &embedder, empty, &identity, &opts).await.unwrap();
        assert_eq!(summary.chunks_deleted, 89);
        let sizes: Vec<usize> = store
            .calls()
            .into_iter()
            .filter_map(|c| if let Call::Delete(ids) = c { Some(ids.len()) } else { None })
            .collect();
        assert!(sizes.iter().all(|&n| n <= expected), "{sizes:?}");
        assert_eq!(sizes.len(), 89usize.div_ceil(expected));
        assert_eq!(store.len(), 0);
    }
}

#[tokio::test]
async fn upserts_go_out_in_id_order_and_deletions_come_last() {
    let dir = corpus_copy();
    let identity = main_identity();
    let store = MemoryStore::new(1000);
    run(&store, &HashEmbedder::default(), dir.path(), &identity).await;
    std::fs::write(dir.path().join("docs/new.md"), "# New\n\nA new page.\n").unwrap();
    std::fs::remove_file(dir.path().join("docs/notes.txt")).unwrap();
    let opts = SyncOptions { batch_size: 2, ..SyncOptions::default() };
    store.clear_calls();
    let mut records = built(dir.path(), &identity).records;
    records.reverse();
    sync(&store, &HashEmbedder::default(), records, &identity.namespace_id(), &opts).await.unwrap();
    let calls = store.calls();
    let last_upsert = calls.iter().rposition(|c| matches!(c, Call::Upsert(_))).unwrap();
    let first_delete = calls.iter().position(|c| matches!(c, Call::Delete(_))).unwrap();
    assert!(last_upsert < first_delete, "{calls:?}");
    let upserted = store.upserted();
    let mut sorted = upserted.clone();
    sorted.sort();
    assert_eq!(upserted, sorted);
    let deleted = store.deleted();
    let mut sorted = deleted.clone();
    sorted.sort();
    assert_eq!(deleted, sorted);
}

#[tokio::test]
async fn a_dry_run_computes_the_summary_and_writes_nothing() {
    let dir = corpus_copy();
    let identity = main_identity();
    let store = MemoryStore::new(1000);
    run(&store, &HashEmbedder::default(), dir.path(), &identity).await;
    let before = store.namespace(&identity.namespace_id());
    std::fs::remove_file(dir.path().join("web/app.ts")).unwrap();
    std::fs::write(dir.path().join("docs/new.md"), "# New\n\nA new page.\n").unwrap();

    store.clear_calls();
    let embedder = CountingEmbedder::default();
    let opts = SyncOptions { dry_run: true, ..SyncOptions::default() };
    let summary = sync_build(&store, &embedder, built(dir.path(), &identity), &identity, &opts).await.unwrap();
    assert!(summary.dry_run);
    assert_eq!(summary.chunks_added_or_updated, 1);
    assert!(summary.chunks_deleted > 0);
    assert_eq!(summary.chunks_unchanged + summary.chunks_deleted, 89);
    assert_eq!(store.calls(), vec![Call::List(identity.namespace_id())], "a dry run only lists");
    assert_eq!(embedder.calls(), 0);
    assert_eq!(store.namespace(&identity.namespace_id()), before);

    // Into an empty store.
    let empty = MemoryStore::new(1000);
    let summary = sync_build(&empty, &embedder, built(dir.path(), &identity), &identity, &opts).await.unwrap();
    assert_eq!((summary.chunks_added_or_updated, summary.chunks_deleted), (summary.chunks_desired, 0));
    assert_eq!(empty.writes(), Vec::<Call>::new());
    assert_eq!(embedder.calls(), 0);
}

#[tokio::test]
async fn documents_are_embedded_with_the_document_prefix() {
    let identity = main_identity();
    let records = built(&corpus(), &identity).records;
    for prefix in ["passage: ", "doc: ", ""] {
        let store = MemoryStore::new(1000);
        let embedder = CountingEmbedder::default();
        let opts = SyncOptions { document_prefix: prefix.into(), ..SyncOptions::default() };
        sync(&store, &embedder, records.clone(), &identity.namespace_id(), &opts).await.unwrap();
        let inputs: BTreeSet<String> = embedder.inputs().into_iter().collect();
        let expected: BTreeSet<String> = records.iter().map(|r| format!("{prefix}{}", r.document)).collect();
        assert_eq!(inputs, expected);
        // The stored document has no prefix; the vector is the prefixed text's.
        let hash = HashEmbedder::default();
        for record in store.namespace(&identity.namespace_id()).values() {
            let original = records.iter().find(|r| r.id == record.chunk.id).unwrap();
            assert_eq!(&record.chunk, original);
            assert_eq!(record.embedding, hash.embed_text(&format!("{prefix}{}", original.document)));
        }
    }
}

#[tokio::test]
async fn progress_is_reported_per_batch() {
    let identity = main_identity();
    let store = MemoryStore::new(1000);
    let seen: Arc<Mutex<Vec<SyncProgress>>> = Arc::default();
    let log = seen.clone();
    let opts = SyncOptions {
        batch_size: 40,
        progress: Some(Arc::new(move |p| log.lock().unwrap().push(p))),
        ..SyncOptions::default()
    };
    sync_build(&store, &HashEmbedder::default(), built(&corpus(), &identity), &identity, &opts).await.unwrap();
    let p = |phase, done, total| SyncProgress { phase, done, total };
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            p(SyncPhase::Upsert, 0, 89),
            p(SyncPhase::Upsert, 40, 89),
            p(SyncPhase::Upsert, 80, 89),
            p(SyncPhase::Upsert, 89, 89),
            p(SyncPhase::Delete, 0, 0),
        ]
    );
}

#[tokio::test]
async fn records_of_another_namespace_or_duplicates_are_refused_before_any_call() {
    let identity = main_identity();
    let records = built(&corpus(), &identity).records;
    let store = MemoryStore::new(1000);
    let embedder = CountingEmbedder::default();

    let err = sync(&store, &embedder, records.clone(), &release_identity().namespace_id(), &SyncOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, SyncError::ForeignRecord { .. }), "{err:?}");
    assert!(err.to_string().starts_with(&format!(
        "record {} belongs to namespace {}",
        records[0].id,
        identity.namespace_id()
    )));

    let mut doubled = records.clone();
    doubled.push(records[5].clone());
    let err = sync(&store, &embedder, doubled, &identity.namespace_id(), &SyncOptions::default()).await.unwrap_err();
    assert_eq!(err.to_string(), format!("desired state contains duplicate deterministic record ID {}", records[5].id));

    let opts = SyncOptions { batch_size: 0, ..SyncOptions::default() };
    let err = sync(&store, &embedder, records.clone(), &identity.namespace_id(), &opts).await.unwrap_err();
    assert_eq!(err.to_string(), "batch_size must be a positive integer");
    let err = sync(&store, &embedder, Vec::new(), "", &SyncOptions::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "namespace_id must not be empty");

    assert_eq!(store.calls(), Vec::<Call>::new());
    assert_eq!(embedder.calls(), 0);
}

#[tokio::test]
async fn a_store_that_loses_writes_fails_verification() {
    let identity = main_identity();
    let store = MemoryStore { max_batch: 1000, drop_writes: true, ..MemoryStore::default() };
    let err = run_err(&store, &HashEmbedder::default(), &identity).await;
    assert!(matches!(err, SyncError::Verification { expected: 89, found: 0 }), "{err:?}");
    assert_eq!(err.to_string(), "verification failed: expected 89 namespace records, found 0");
}

/// Pushes a streamed build of `root` file by file into a [`StreamSync`].
async fn stream_run(
    store: &dyn IndexStore,
    embedder: &dyn Embedder,
    root: &Path,
    identity: &Identity,
    opts: &SyncOptions,
) -> Result<SyncSummary, SyncError> {
    let mut stream = build_stream(root, identity, &IndexOptions::default()).unwrap();
    let mut sync = StreamSync::start(store, embedder, &identity.namespace_id(), opts).await?;
    while let Some(group) = stream.next_group() {
        for file in group.unwrap() {
            sync.push(file.content.map(|(_, records)| records).unwrap_or_default()).await?;
        }
    }
    Ok(sync.finish().await?.with_identity(identity).with_build_stats(&stream.stats()))
}

#[test]
fn a_streamed_build_delivers_the_build_file_by_file_in_id_order() {
    let identity = main_identity();
    let whole = built(&corpus(), &identity);
    for threads in [1, 3] {
        let options = IndexOptions { threads, ..IndexOptions::default() };
        let mut stream = build_stream(&corpus(), &identity, &options).unwrap();
        assert_eq!(stream.files(), whole.stats.files_eligible);
        let mut files = Vec::new();
        while let Some(group) = stream.next_group() {
            files.extend(group.unwrap());
        }
        assert_eq!(stream.stats(), whole.stats);
        let streamed: Vec<Chunk> = files.iter().flat_map(|f| f.content.iter().flat_map(|(_, r)| r.clone())).collect();
        let mut sorted = whole.records.clone();
        sorted.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(streamed, sorted, "the stream's records are the build's, in id order");
        let mut positions: Vec<usize> = files.iter().map(|f| f.position).collect();
        positions.sort_unstable();
        assert_eq!(positions, (0..files.len()).collect::<Vec<_>>());
        for file in &files {
            if let Some((text, records)) = &file.content {
                assert!(records.iter().all(|r| r.metadata.path == file.path));
                assert!(!text.is_empty() || records.is_empty());
            }
        }
    }
}

#[tokio::test]
async fn a_streamed_sync_writes_what_a_whole_sync_writes_in_the_same_calls() {
    let dir = corpus_copy();
    let identity = main_identity();
    let (whole, streamed) = (MemoryStore::new(1000), MemoryStore::new(1000));
    let opts = SyncOptions { batch_size: 7, ..SyncOptions::default() };
    for _ in 0..2 {
        let a = sync_build(&whole, &HashEmbedder::default(), built(dir.path(), &identity), &identity, &opts).await;
        let b = stream_run(&streamed, &HashEmbedder::default(), dir.path(), &identity, &opts).await;
        let (mut a, mut b) = (a.unwrap(), b.unwrap());
        (a.duration_ms, b.duration_ms) = (0, 0);
        assert_eq!(a, b);
        assert_eq!(whole.calls(), streamed.calls());
        assert_eq!(whole.namespace(&identity.namespace_id()), streamed.namespace(&identity.namespace_id()));
        std::fs::remove_file(dir.path().join("docs/notes.txt")).unwrap_or_default();
        std::fs::write(dir.path().join("docs/new.md"), "# New\n\nA new page.\n").unwrap();
    }
}

#[tokio::test]
async fn a_streamed_sync_refuses_a_record_pushed_twice_before_deleting_anything() {
    let identity = main_identity();
    let store = MemoryStore::new(1000);
    run(&store, &HashEmbedder::default(), &corpus(), &identity).await;
    let records = built(&corpus(), &identity).records;
    let stale = Chunk { id: "stale".into(), metadata: records[0].metadata.clone(), ..Chunk::default() };
    store.records.lock().unwrap().insert("stale".into(), EmbeddedChunk { chunk: stale, embedding: vec![1.0] });
    store.clear_calls();
    let opts = SyncOptions::default();
    let embedder = HashEmbedder::default();
    let mut sync = StreamSync::start(&store, &embedder, &identity.namespace_id(), &opts).await.unwrap();
    sync.push(records[..10].to_vec()).await.unwrap();
    let err = sync.push(records[5..6].to_vec()).await.unwrap_err();
    assert_eq!(err.to_string(), format!("desired state contains duplicate deterministic record ID {}", records[5].id));
    assert_eq!(store.deleted(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------
// The real embedded store
// ---------------------------------------------------------------------------

#[tokio::test]
async fn syncs_into_the_embedded_store() {
    let dir = corpus_copy();
    let data = tempfile::tempdir().unwrap();
    let store = rr_embedded::EmbeddedStore::open(data.path()).unwrap();
    let embedder = CountingEmbedder::default();
    let (main, release) = (main_identity(), release_identity());

    let first = run(&store, &embedder, dir.path(), &main).await;
    assert_eq!((first.chunks_added_or_updated, first.chunks_deleted), (89, 0));
    run(&store, &embedder, dir.path(), &release).await;
    assert_eq!(store.len(), 178);

    let calls = embedder.calls();
    let again = run(&store, &embedder, dir.path(), &main).await;
    assert_eq!((again.chunks_added_or_updated, again.chunks_unchanged, again.chunks_deleted), (0, 89, 0));
    assert_eq!(embedder.calls(), calls, "nothing to embed on an unchanged tree");

    let release_ids = store.ids_in_namespace(&release.namespace_id()).unwrap();
    let path = dir.path().join("py/widgets/client.py");
    let before = built(dir.path(), &main);
    std::fs::write(&path, std::fs::read_to_string(&path).unwrap() + "\n\ndef added():\n    return 1\n").unwrap();
    let after = built(dir.path(), &main);
    let edited = run(&store, &embedder, dir.path(), &main).await;
    let old_ids = ids_of_path(&before.records, "py/widgets/client.py");
    assert_eq!(edited.chunks_deleted, old_ids.len());
    assert_eq!(edited.chunks_added_or_updated, ids_of_path(&after.records, "py/widgets/client.py").len());

    let mut expected: Vec<String> = after.records.iter().map(|r| r.id.clone()).collect();
    expected.sort();
    assert_eq!(store.ids_in_namespace(&main.namespace_id()).unwrap(), expected);
    assert_eq!(store.ids_in_namespace(&release.namespace_id()).unwrap(), release_ids, "release untouched");
    assert!(store.check().unwrap().is_consistent());

    // The store survives a reopen with the same content.
    drop(store);
    let reopened = rr_embedded::EmbeddedStore::open(data.path()).unwrap();
    assert_eq!(reopened.len(), 178 - old_ids.len() + ids_of_path(&after.records, "py/widgets/client.py").len());
}
