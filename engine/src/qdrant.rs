//! `index --qdrant-url URL --collection NAME`: a folder into a Qdrant
//! collection, through the same streamed sync as the embedded store.
//!
//! The collection records what wrote it, as a store folder's settings file
//! does: its metadata holds the [`StoreSettings`] under [`SETTINGS_KEY`]
//! (the embedder, its prefixes, the chunking, an OpenAI-compatible
//! endpoint without its key). A new collection gets the embedder asked for,
//! [`DEFAULT_EMBEDDER`] otherwise, and the embedded store's default
//! chunking; an existing one keeps its own and refuses another, since
//! vectors made another way would not be comparable. A collection that
//! records no settings was not written by this indexer and is refused.
//!
//! Each record is written with its dense vector and its sparse BM25 vector
//! (see `rr_qdrant::sparse`). The sync is the embedded store's: records are
//! diffed by id against the namespace's points, so a re-index over
//! unchanged files embeds and writes nothing, a changed file's records are
//! replaced, and the records of files that are gone are deleted once every
//! upsert has succeeded. Each point records the chunking it was cut with,
//! so a file whose text hashes as its points say, cut the same way and held
//! whole, is not chunked again ([`known_files`]), as in the embedded store.
//!
//! [`engine`] searches such a collection as the embedded store is searched:
//! queries embedded by the embedder the collection records, hybrid over
//! Qdrant's dense and sparse BM25 rankings, the head read again with the
//! term counts Qdrant keeps, and the code ranking with the files a query
//! names.

use std::sync::Arc;
use std::time::Instant;

use qdrant_client::Qdrant;
use rr_core::retrieval::RetrievalSettingError;
use rr_core::{BackendError, Reranker, SearchEngine};
use rr_indexer::sync::SyncSummary;
use rr_qdrant::{
    DEFAULT_DENSE_VECTOR, DEFAULT_SPARSE_VECTOR, PayloadLayout, QdrantIndex, QdrantStore, RetryPolicy, Target,
    WriteTarget,
};
use serde_json::{Map, Value};

use crate::local::{
    DEFAULT_EMBEDDED_CHUNKING, DEFAULT_EMBEDDER, EMBEDDED_PER_FILE, EmbeddingEndpoint, IndexRequest, LocalError,
    StoreSettings, embedder_for, new_store_settings, stream_into, sync_options,
};
use crate::retrieval::EngineSettings;

/// The collection metadata key of the [`StoreSettings`] it was written with.
pub const SETTINGS_KEY: &str = "repo_retriever";

/// The environment variable the Qdrant API key is read from (never a flag or a file).
pub const API_KEY_ENV: &str = "QDRANT_API_KEY";

/// A Qdrant collection to index into.
#[derive(Debug, Clone, Default)]
pub struct QdrantTarget {
    /// The gRPC endpoint, e.g. `http://127.0.0.1:6334`.
    pub url: String,
    pub collection: String,
    pub api_key: Option<String>,
    /// The embedder of a new collection ([`DEFAULT_EMBEDDER`] when `None`);
    /// an existing one must have been written with it.
    pub embedder: Option<String>,
    /// The endpoint of the `openai` embedder.
    pub endpoint: Option<EmbeddingEndpoint>,
    /// The query and document prefixes of a new collection (the embedder's
    /// own when `None`); an existing one keeps its own.
    pub query_prefix: Option<String>,
    pub document_prefix: Option<String>,
    /// Shards of a new collection (Qdrant's default: one per node).
    pub shards: Option<u32>,
    /// Copies of each shard of a new collection (Qdrant's default: 1).
    pub replication_factor: Option<u32>,
}

/// A failure of `index --qdrant-url`, worded for the operator.
#[derive(Debug, thiserror::Error)]
pub enum QdrantIndexError {
    #[error("invalid Qdrant URL {url:?}: {message}")]
    Url { url: String, message: String },
    #[error(
        "the Qdrant collection \"{0}\" was not created by `repo-retriever index` (its metadata records no \
         embedder): index into a new collection"
    )]
    NotIndexed(String),
    #[error("the Qdrant collection \"{collection}\" records settings this build cannot read: {source}")]
    InvalidSettings { collection: String, source: serde_json::Error },
    #[error(
        "the Qdrant collection \"{collection}\" was created with the \"{kept}\" embedder, not \"{asked}\": a \
         collection keeps its embedder (index into another --collection to use \"{asked}\")"
    )]
    KeepsEmbedder { collection: String, kept: String, asked: String },
    #[error(
        "the Qdrant collection \"{collection}\" was created with the {what} {kept:?}, not {asked:?}: a collection \
         keeps its prefixes"
    )]
    KeepsPrefix { collection: String, what: &'static str, kept: String, asked: String },
    #[error(transparent)]
    Local(#[from] LocalError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Retrieval(#[from] RetrievalSettingError),
}

impl From<rr_indexer::SyncError> for QdrantIndexError {
    fn from(e: rr_indexer::SyncError) -> Self {
        QdrantIndexError::Local(e.into())
    }
}

/// The client of `target`: lazy (nothing connects before the first call),
/// without qdrant-client's version check, which prints to stdout.
pub fn client(target: &QdrantTarget) -> Result<Qdrant, QdrantIndexError> {
    Qdrant::from_url(&target.url)
        .api_key(target.api_key.clone())
        .skip_compatibility_check()
        .build()
        .map_err(|e| QdrantIndexError::Url { url: target.url.clone(), message: e.to_string() })
}

/// The settings `target` is indexed with: the collection's own, or a new
/// collection's.
async fn collection_settings(
    index: &QdrantIndex,
    target: &QdrantTarget,
) -> Result<(StoreSettings, Option<Map<String, Value>>), QdrantIndexError> {
    let Some(metadata) = index.collection_metadata().await? else {
        let mut settings =
            new_store_settings(target.embedder.as_deref().unwrap_or(DEFAULT_EMBEDDER), target.endpoint.clone())?;
        settings.chunking = DEFAULT_EMBEDDED_CHUNKING;
        if let Some(prefix) = &target.query_prefix {
            settings.query_prefix = prefix.clone();
        }
        if let Some(prefix) = &target.document_prefix {
            settings.document_prefix = prefix.clone();
        }
        return Ok((settings, None));
    };
    let Some(recorded) = metadata.get(SETTINGS_KEY) else {
        return Err(QdrantIndexError::NotIndexed(target.collection.clone()));
    };
    let settings: StoreSettings = serde_json::from_value(recorded.clone())
        .map_err(|source| QdrantIndexError::InvalidSettings { collection: target.collection.clone(), source })?;
    if let Some(asked) = &target.embedder
        && *asked != settings.embedder
    {
        return Err(QdrantIndexError::KeepsEmbedder {
            collection: target.collection.clone(),
            kept: settings.embedder,
            asked: asked.clone(),
        });
    }
    for (what, asked, kept) in [
        ("query prefix", &target.query_prefix, &settings.query_prefix),
        ("document prefix", &target.document_prefix, &settings.document_prefix),
    ] {
        if let Some(asked) = asked
            && asked != kept
        {
            return Err(QdrantIndexError::KeepsPrefix {
                collection: target.collection.clone(),
                what,
                kept: kept.clone(),
                asked: asked.clone(),
            });
        }
    }
    Ok((settings, Some(metadata)))
}

/// Indexes `request.root` into the collection of `target` (`request.store`
/// and `request.chroma` are not used): see the module docs.
pub async fn index(request: IndexRequest, target: &QdrantTarget) -> Result<SyncSummary, QdrantIndexError> {
    let started = Instant::now();
    let client = client(target)?;
    let mut write = WriteTarget::new(&target.collection);
    write.shards = target.shards;
    write.replication_factor = target.replication_factor;
    let probe = QdrantIndex::new(client.clone(), write.clone(), RetryPolicy::default());
    let (mut settings, existing) = collection_settings(&probe, target).await?;
    let new = existing.is_none();
    // Sparse weights must stay comparable with those already written.
    if let Some(avg) = existing.as_ref().and_then(QdrantIndex::recorded_avg_tokens) {
        write.avg_tokens = avg;
    }
    if let Some(scheme) = request.chunking
        && new
    {
        settings.chunking = scheme;
    }
    let embedder = embedder_for(&settings)?;
    if new {
        let mut metadata = Map::new();
        metadata.insert(SETTINGS_KEY.into(), serde_json::to_value(&settings).map_err(LocalError::from)?);
        write.metadata = metadata;
    }

    // Another chunking than the collection's cuts other records: asked for, it rewrites them all.
    let scheme = request.chunking.unwrap_or(settings.chunking);
    let (root, identity, mut options) = (request.root.clone(), request.identity.clone(), request.options.clone());
    options.chunking.scheme = scheme;
    let chunking = options.chunking;
    write.chunking = Some(chunking.key());
    let index = QdrantIndex::new(client, write, RetryPolicy::default());
    let known = known_files(&index, &identity.namespace_id(), chunking).await?;
    let stream = tokio::task::spawn_blocking(move || rr_indexer::build_stream_known(&root, &identity, &options, known))
        .await
        .map_err(LocalError::from)?
        .map_err(LocalError::from)?;
    let opts = sync_options(&request, &settings, started);
    let embedder: Arc<dyn rr_core::Embedder> = embedder;
    Ok(stream_into(&index, embedder.as_ref(), None, stream, &request, &opts, chunking).await?)
}

/// The files of `namespace_id` whose points `index` holds, all of them, cut
/// by `chunking`: those a re-index need not read again. A file whose points
/// record another chunking (or none: written before points recorded it),
/// or whose records are not all there, is chunked again, and its records
/// that are stored count as unchanged.
pub async fn known_files(
    index: &QdrantIndex,
    namespace_id: &str,
    chunking: rr_indexer::ChunkingOptions,
) -> Result<rr_indexer::KnownFiles, BackendError> {
    let key = chunking.key();
    let (ids, files) = index.namespace_files(namespace_id).await?;
    if !files.iter().any(|f| f.chunking == key) {
        return Ok(rr_indexer::KnownFiles::new());
    }
    let ids: std::collections::HashSet<String> = ids.into_iter().collect();
    Ok(files
        .into_iter()
        .filter(|f| f.chunking == key && f.chunks > 0)
        .filter(|f| {
            rr_indexer::file_record_ids(namespace_id, &f.path, &f.file_hash, chunking.scheme, f.chunks)
                .iter()
                .all(|id| ids.contains(id))
        })
        .map(|f| (f.path, rr_indexer::KnownFile { file_hash: f.file_hash, chunks: f.chunks }))
        .collect())
}

/// The [`StoreSettings`] a collection records, for a reader that embeds
/// queries as its writer did; `None` when the collection does not exist.
pub async fn read_settings(target: &QdrantTarget) -> Result<Option<StoreSettings>, QdrantIndexError> {
    let probe = QdrantIndex::new(client(target)?, WriteTarget::new(&target.collection), RetryPolicy::default());
    let Some(metadata) = probe.collection_metadata().await? else { return Ok(None) };
    let recorded: Value =
        metadata.get(SETTINGS_KEY).cloned().ok_or_else(|| QdrantIndexError::NotIndexed(target.collection.clone()))?;
    serde_json::from_value(recorded)
        .map(Some)
        .map_err(|source| QdrantIndexError::InvalidSettings { collection: target.collection.clone(), source })
}

/// Deletes the collection of `target`; whether it existed.
pub async fn delete_collection(target: &QdrantTarget) -> Result<bool, QdrantIndexError> {
    let client = client(target)?;
    let failed = |e: qdrant_client::QdrantError| {
        BackendError::new(rr_qdrant::STORE_NAME, format!("Qdrant collection deletion failed: {e}"))
    };
    if !client.collection_exists(&target.collection).await.map_err(failed)? {
        return Ok(false);
    }
    client.delete_collection(&target.collection).await.map_err(failed)?;
    Ok(true)
}

/// What an engine over a collection `index` wrote is built with unless the
/// operator says otherwise: the embedded store's defaults (hybrid, every
/// result of one file in ranking order, the code ranking on) and the query
/// prefix the collection records.
pub fn engine_settings(settings: &StoreSettings) -> EngineSettings {
    EngineSettings {
        query_prefix: settings.query_prefix.clone(),
        per_file: EMBEDDED_PER_FILE,
        code_rank: Some(rr_core::CodeRank::default()),
        ..EngineSettings::default()
    }
}

/// The search engine over the collection of `target`, which `index` wrote
/// with `settings` ([`read_settings`]): its dense and sparse BM25 vectors,
/// queries embedded by the embedder it records, as `engine` says; `key`
/// names a refused retrieval setting as the operator wrote it.
pub fn engine(
    target: &QdrantTarget,
    settings: &StoreSettings,
    reranker: Option<Arc<dyn Reranker>>,
    engine: &EngineSettings,
    key: impl Fn(&str) -> String,
) -> Result<SearchEngine, QdrantIndexError> {
    let store = QdrantStore::new(
        client(target)?,
        Target {
            collection: target.collection.clone(),
            vector_name: Some(DEFAULT_DENSE_VECTOR.into()),
            sparse_vector_name: Some(DEFAULT_SPARSE_VECTOR.into()),
            layout: PayloadLayout::default(),
        },
    );
    let embedder = embedder_for(settings)?;
    Ok(crate::retrieval::engine(Arc::new(store), embedder, reranker, engine, key)?)
}

#[cfg(test)]
mod tests {
    //! Against the Qdrant of `QDRANT_URL` (`scripts/test` starts one):
    //! skipped without it, a failure under `CI=true`.

    use std::path::Path;

    use rr_indexer::{Identity, IndexOptions};

    use super::*;

    fn qdrant_url() -> Option<String> {
        match std::env::var("QDRANT_URL") {
            Ok(url) if !url.is_empty() => Some(url),
            _ => {
                let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
                assert!(!ci, "CI=true but QDRANT_URL is not set (scripts/test starts a Qdrant)");
                eprintln!("skipped: QDRANT_URL is not set (no Qdrant server to test against)");
                None
            }
        }
    }

    /// A copy of the indexer's own sources: a real folder that the test may change.
    fn folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../indexer/src");
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
            }
        }
        dir
    }

    fn request(root: &Path) -> IndexRequest {
        IndexRequest {
            root: root.to_owned(),
            store: root.join("unused"),
            chroma: None,
            chunking: None,
            identity: Identity::new("acme", "widgets", "main", ""),
            options: IndexOptions::default(),
            batch_size: 50,
            dry_run: false,
            output_manifest: None,
            progress: None,
            lexical_index: false,
        }
    }

    async fn drop_collection(target: &QdrantTarget) {
        let client = client(target).unwrap();
        if client.collection_exists(&target.collection).await.unwrap() {
            client.delete_collection(&target.collection).await.unwrap();
        }
    }

    #[tokio::test]
    async fn index_syncs_incrementally_and_the_collection_keeps_its_embedder() {
        let Some(url) = qdrant_url() else { return };
        let target = QdrantTarget { url, collection: "rr-engine-test-index".into(), ..QdrantTarget::default() };
        drop_collection(&target).await;
        let dir = folder();

        // A dry run creates nothing.
        let dry = index(IndexRequest { dry_run: true, ..request(dir.path()) }, &target).await.unwrap();
        assert!(dry.chunks_added_or_updated > 0);
        assert_eq!(read_settings(&target).await.unwrap(), None);

        let first = index(request(dir.path()), &target).await.unwrap();
        assert!(first.chunks_desired > 20, "{first:?}");
        assert_eq!(first.chunks_added_or_updated, first.chunks_desired);
        let settings = read_settings(&target).await.unwrap().expect("the collection records its settings");
        assert_eq!((settings.embedder.as_str(), settings.chunking), ("potion", DEFAULT_EMBEDDED_CHUNKING));
        let probe =
            QdrantIndex::new(client(&target).unwrap(), WriteTarget::new(&target.collection), RetryPolicy::default());
        let metadata = probe.collection_metadata().await.unwrap().unwrap();
        assert_eq!(QdrantIndex::recorded_avg_tokens(&metadata), Some(rr_qdrant::sparse::DEFAULT_AVG_TOKENS));

        let again = index(request(dir.path()), &target).await.unwrap();
        assert_eq!(
            (again.chunks_added_or_updated, again.chunks_deleted, again.chunks_unchanged),
            (0, 0, first.chunks_desired),
            "a re-index over unchanged files writes nothing"
        );
        assert_eq!(first.files_unchanged, 0);
        assert_eq!(again.files_unchanged, again.files_eligible, "nor chunks any file again");

        // One file edited, one removed: only theirs change.
        std::fs::write(dir.path().join("lib.rs"), "/// Now a small crate.\npub fn edited() {}\n").unwrap();
        std::fs::remove_file(dir.path().join("sync.rs")).unwrap();
        let changed = index(request(dir.path()), &target).await.unwrap();
        assert_eq!(changed.chunks_added_or_updated, 1, "{changed:?}");
        assert!(changed.chunks_deleted > 1, "{changed:?}");
        assert_eq!(changed.chunks_unchanged + 1, changed.chunks_desired);
        assert_eq!(changed.files_unchanged + 1, changed.files_eligible, "only the edited file is read again");
        // Another chunk size cuts other records: every file is chunked again.
        let mut resized = request(dir.path());
        resized.options.chunking.chunk_size = 256;
        let resized = index(resized, &target).await.unwrap();
        assert_eq!(resized.files_unchanged, 0, "{resized:?}");

        let hash = QdrantTarget { embedder: Some("hash".into()), ..target.clone() };
        assert_eq!(
            index(request(dir.path()), &hash).await.unwrap_err().to_string(),
            "the Qdrant collection \"rr-engine-test-index\" was created with the \"potion\" embedder, not \"hash\": a \
             collection keeps its embedder (index into another --collection to use \"hash\")"
        );
        drop_collection(&target).await;
    }

    #[tokio::test]
    async fn a_collection_the_indexer_did_not_create_is_refused() {
        let Some(url) = qdrant_url() else { return };
        let target = QdrantTarget { url, collection: "rr-engine-test-foreign".into(), ..QdrantTarget::default() };
        drop_collection(&target).await;
        let client = client(&target).unwrap();
        client
            .create_collection(qdrant_client::qdrant::CreateCollectionBuilder::new(&target.collection).vectors_config(
                qdrant_client::qdrant::VectorParamsBuilder::new(4, qdrant_client::qdrant::Distance::Cosine),
            ))
            .await
            .unwrap();
        let dir = folder();
        assert_eq!(
            index(request(dir.path()), &target).await.unwrap_err().to_string(),
            "the Qdrant collection \"rr-engine-test-foreign\" was not created by `repo-retriever index` (its metadata \
             records no embedder): index into a new collection"
        );
        drop_collection(&target).await;
    }
}
