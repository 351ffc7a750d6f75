//! The write side: [`QdrantIndex`] as the indexer's [`IndexStore`].
//!
//! A record becomes one point:
//!
//! - its id is a UUID made from the record id ([`point_uuid`]: Qdrant ids
//!   are UUIDs or integers), and the record id itself is kept in the
//!   payload under [`RECORD_ID_KEY`], which is what a namespace listing
//!   returns;
//! - its payload is what [`crate::QdrantStore`] reads with the default
//!   [`crate::PayloadLayout`]: the document under `document`, the record's
//!   metadata fields flat beside it;
//! - its vectors are named: the embedder's under
//!   [`WriteTarget::dense_vector`] (cosine) and the BM25 term weights of
//!   [`crate::sparse`] under [`WriteTarget::sparse_vector`], a sparse vector
//!   with Qdrant's `IDF` modifier;
//! - its distinct full-text terms sit in the payload under [`TERMS_KEY`],
//!   a keyword-indexed list: Qdrant counts the points holding a term
//!   (`count` with a `match`), which gives the document frequencies the
//!   engine reads a hybrid ranking's head again with. Kept with the point,
//!   they stay right as records come and go and over any number of shards.
//!
//! With [`WriteTarget::chunking`] set, each point also records under
//! [`CHUNKING_KEY`] how its record was cut, so that a later run can tell
//! from a namespace listing ([`QdrantIndex::namespace_files`]) which files
//! it holds whole, by their text's hash, and need not read them again.
//!
//! The collection is created before the first upsert (never by a listing,
//! so a dry run leaves the server as it was), with the shards, replication
//! factor and metadata of the [`WriteTarget`] and keyword indexes on the
//! fields queries filter by. Writes wait until the points are applied, so a
//! listing right after an upsert sees them; the indexer relies on that.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use qdrant_client::Payload;
use qdrant_client::qdrant::r#match::MatchValue;
use qdrant_client::qdrant::points_selector::PointsSelectorOneOf;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::with_payload_selector::SelectorOptions;
use qdrant_client::qdrant::{
    CollectionExistsRequest, Condition, CreateCollection, CreateFieldIndexCollection, DeletePoints, Distance,
    FieldType, Filter, GetCollectionInfoRequest, Modifier, NamedVectors, PayloadIncludeSelector, PointStruct,
    PointsIdsList, PointsSelector, ScrollPoints, SparseVectorConfig, SparseVectorParams, UpsertPoints, Vector,
    VectorParams, VectorParamsMap, VectorsConfig, WithPayloadSelector,
};
use rr_core::{BackendError, EmbeddedChunk, IndexStore};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::client::{INFO_OPERATION, RetryPolicy, RetryingClient, STORE_NAME};
use crate::sparse;

/// The payload key of the document text: what the indexer writes, and what
/// the store reads unless told otherwise.
pub const DEFAULT_DOCUMENT_KEY: &str = "document";
/// The collection metadata key of the BM25 `avgdl` its sparse vectors were
/// written with: later writes must use the same.
pub const AVG_TOKENS_KEY: &str = "bm25_avg_tokens";
/// The dense vector's name in a collection the indexer creates.
pub const DEFAULT_DENSE_VECTOR: &str = "dense";
/// The sparse BM25 vector's name in a collection the indexer creates.
pub const DEFAULT_SPARSE_VECTOR: &str = "bm25";
/// The payload key of the record id.
pub const RECORD_ID_KEY: &str = "record_id";
/// The payload key of the chunking a point's record was cut with
/// ([`WriteTarget::chunking`]).
pub const CHUNKING_KEY: &str = "chunking_key";
/// The payload key of a point's distinct full-text terms
/// ([`sparse::document_terms`]), keyword-indexed in a collection the
/// indexer creates; a collection without that index answers no term
/// statistics.
pub const TERMS_KEY: &str = "bm25_terms";
/// The operation names in errors.
pub const CREATE_OPERATION: &str = "Qdrant collection creation";
pub const LIST_OPERATION: &str = "Qdrant namespace listing";
pub const UPSERT_OPERATION: &str = "Qdrant upsert";
pub const DELETE_OPERATION: &str = "Qdrant delete";
/// Points per upsert or delete: a batch of 256 chunks with their vectors
/// stays far below gRPC's 4 MiB message limit.
pub const MAX_BATCH_SIZE: usize = 256;
/// Points per page of a namespace listing.
const LIST_PAGE: u32 = 1000;
/// The payload fields queries filter by or count, indexed as keywords.
const INDEXED_FIELDS: &[&str] =
    &["namespace_id", "organization", "repository", "branch", "path", "language", TERMS_KEY];

/// Where the indexer writes, and how a new collection is laid out.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteTarget {
    pub collection: String,
    pub dense_vector: String,
    pub sparse_vector: String,
    /// The `avgdl` of the BM25 weights ([`sparse::document_vector`]).
    pub avg_tokens: f32,
    /// Shards of a new collection (Qdrant's default when `None`: one per node).
    pub shards: Option<u32>,
    /// Copies of each shard in a new collection (Qdrant's default when `None`: 1).
    pub replication_factor: Option<u32>,
    /// Written as the collection's metadata when it is created: what a
    /// reader needs to know (the embedder, the prefixes, the chunking).
    pub metadata: Map<String, Value>,
    /// The key of the chunking the records are cut with
    /// (`rr_indexer::ChunkingOptions::key`), written into every point.
    pub chunking: Option<String>,
}

/// A file of a namespace as its points tell it ([`QdrantIndex::namespace_files`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    pub path: String,
    /// The SHA-256 of the file's text.
    pub file_hash: String,
    /// The records the file was cut into.
    pub chunks: usize,
    /// The [`WriteTarget::chunking`] its points record, empty when one does not.
    pub chunking: String,
}

impl WriteTarget {
    /// A target with the default vector names and BM25 `avgdl`.
    pub fn new(collection: impl Into<String>) -> Self {
        WriteTarget {
            collection: collection.into(),
            dense_vector: DEFAULT_DENSE_VECTOR.into(),
            sparse_vector: DEFAULT_SPARSE_VECTOR.into(),
            avg_tokens: sparse::DEFAULT_AVG_TOKENS,
            shards: None,
            replication_factor: None,
            metadata: Map::new(),
            chunking: None,
        }
    }
}

/// A stable point id for a record id: its SHA-256's first 16 bytes as a UUID.
pub fn point_uuid(record_id: &str) -> String {
    let h = Sha256::digest(record_id.as_bytes());
    let x: String = h.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &x[0..8], &x[8..12], &x[12..16], &x[16..20], &x[20..32])
}

/// A Qdrant collection as the indexer's store.
pub struct QdrantIndex {
    client: RetryingClient,
    target: WriteTarget,
    /// Whether the collection is known to exist (then no upsert creates it).
    exists: AtomicBool,
}

impl std::fmt::Debug for QdrantIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdrantIndex").field("target", &self.target).finish_non_exhaustive()
    }
}

impl QdrantIndex {
    pub fn new(client: qdrant_client::Qdrant, target: WriteTarget, policy: RetryPolicy) -> Self {
        QdrantIndex { client: RetryingClient::new(client, policy), target, exists: AtomicBool::new(false) }
    }

    pub fn target(&self) -> &WriteTarget {
        &self.target
    }

    /// The `avgdl` recorded in a collection's metadata, if any.
    pub fn recorded_avg_tokens(metadata: &Map<String, Value>) -> Option<f32> {
        metadata.get(AVG_TOKENS_KEY).and_then(Value::as_f64).map(|v| v as f32).filter(|v| *v > 0.0)
    }

    /// Whether the collection exists.
    pub async fn exists(&self) -> Result<bool, BackendError> {
        if self.exists.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let name = self.target.collection.clone();
        let found = self
            .client
            .run(INFO_OPERATION, |client| {
                let request = CollectionExistsRequest { collection_name: name.clone() };
                async move { client.collection_exists(request).await }
            })
            .await?;
        self.exists.store(found, Ordering::Relaxed);
        Ok(found)
    }

    /// The metadata the collection was created with; `None` when it does not exist.
    pub async fn collection_metadata(&self) -> Result<Option<Map<String, Value>>, BackendError> {
        let Some(config) = self.collection_config().await? else { return Ok(None) };
        let metadata = config.map(|c| c.metadata).unwrap_or_default();
        Ok(Some(metadata.into_iter().map(|(k, v)| (k, Value::from(v))).collect()))
    }

    /// The collection's configuration as the server reports it; `None` when
    /// the collection does not exist, `Some(None)` when it reports none.
    async fn collection_config(&self) -> Result<Option<Option<qdrant_client::qdrant::CollectionConfig>>, BackendError> {
        if !self.exists().await? {
            return Ok(None);
        }
        let name = self.target.collection.clone();
        let info = self
            .client
            .run(INFO_OPERATION, |client| {
                let request = GetCollectionInfoRequest { collection_name: name.clone() };
                async move { client.collection_info(request).await }
            })
            .await?;
        Ok(Some(info.result.and_then(|r| r.config)))
    }

    /// The size of the collection's dense vector, when it exists and has one.
    pub async fn dense_dimension(&self) -> Result<Option<usize>, BackendError> {
        let Some(config) = self.collection_config().await? else { return Ok(None) };
        let config = config.and_then(|c| c.params).and_then(|p| p.vectors_config);
        Ok(match config.and_then(|c| c.config) {
            Some(VectorsConfigKind::ParamsMap(m)) => m.map.get(&self.target.dense_vector).map(|p| p.size as usize),
            _ => None,
        })
    }

    /// Creates the collection for `dimension`-long dense vectors, with its
    /// keyword indexes, unless it exists.
    pub async fn create(&self, dimension: usize) -> Result<(), BackendError> {
        if self.exists().await? {
            return Ok(());
        }
        let t = &self.target;
        let dense = VectorParams { size: dimension as u64, distance: Distance::Cosine.into(), ..Default::default() };
        let sparse = SparseVectorParams { modifier: Some(Modifier::Idf.into()), ..Default::default() };
        let request = CreateCollection {
            collection_name: t.collection.clone(),
            vectors_config: Some(VectorsConfig {
                config: Some(VectorsConfigKind::ParamsMap(VectorParamsMap {
                    map: HashMap::from([(t.dense_vector.clone(), dense)]),
                })),
            }),
            sparse_vectors_config: Some(SparseVectorConfig { map: HashMap::from([(t.sparse_vector.clone(), sparse)]) }),
            shard_number: t.shards,
            replication_factor: t.replication_factor,
            metadata: t
                .metadata
                .clone()
                .into_iter()
                .chain([(AVG_TOKENS_KEY.to_owned(), Value::from(f64::from(t.avg_tokens)))])
                .map(|(k, v)| (k, v.into()))
                .collect(),
            ..Default::default()
        };
        let created = self
            .client
            .run(CREATE_OPERATION, |client| {
                let request = request.clone();
                async move { client.create_collection(request).await }
            })
            .await;
        if let Err(e) = created {
            // Created meanwhile by another writer: as good.
            self.exists.store(false, Ordering::Relaxed);
            if !self.exists().await? {
                return Err(e);
            }
        }
        for field in INDEXED_FIELDS {
            let request = CreateFieldIndexCollection {
                collection_name: t.collection.clone(),
                wait: Some(true),
                field_name: (*field).to_owned(),
                field_type: Some(FieldType::Keyword.into()),
                ..Default::default()
            };
            self.client
                .run(CREATE_OPERATION, |client| {
                    let request = request.clone();
                    async move { client.create_field_index(request).await }
                })
                .await?;
        }
        self.exists.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Calls `each` with the payload fields `fields` of every point whose
    /// `namespace_id` matches; none when the collection does not exist.
    async fn scroll_namespace(
        &self,
        namespace_id: &str,
        fields: &[&str],
        mut each: impl FnMut(&HashMap<String, qdrant_client::qdrant::Value>),
    ) -> Result<(), BackendError> {
        if !self.exists().await? {
            return Ok(());
        }
        let mut offset = None;
        loop {
            let request = ScrollPoints {
                collection_name: self.target.collection.clone(),
                filter: Some(Filter::must([Condition::matches(
                    "namespace_id",
                    MatchValue::Keyword(namespace_id.to_owned()),
                )])),
                offset: offset.take(),
                limit: Some(LIST_PAGE),
                with_payload: Some(WithPayloadSelector {
                    selector_options: Some(SelectorOptions::Include(PayloadIncludeSelector {
                        fields: fields.iter().map(|f| (*f).to_owned()).collect(),
                    })),
                }),
                with_vectors: Some(false.into()),
                ..Default::default()
            };
            let page = self
                .client
                .run(LIST_OPERATION, |client| {
                    let request = request.clone();
                    async move { client.scroll(request).await }
                })
                .await?;
            for point in &page.result {
                each(&point.payload);
            }
            match page.next_page_offset {
                Some(next) => offset = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// Every record id of a namespace, and the files its points come from
    /// (one entry per file, as its first point listed tells it): what a sync
    /// needs to know which files it holds whole.
    pub async fn namespace_files(&self, namespace_id: &str) -> Result<(Vec<String>, Vec<StoredFile>), BackendError> {
        let mut ids = Vec::new();
        let mut files: HashMap<String, StoredFile> = HashMap::new();
        let fields = [RECORD_ID_KEY, "path", "file_hash", "chunk_count", CHUNKING_KEY];
        self.scroll_namespace(namespace_id, &fields, |payload| {
            let Some(id) = payload.get(RECORD_ID_KEY).and_then(|v| v.as_str().cloned()) else { return };
            ids.push(id);
            let text = |key: &str| payload.get(key).and_then(|v| v.as_str().cloned()).unwrap_or_default();
            let path = text("path");
            let chunks = payload.get("chunk_count").and_then(|v| v.as_integer()).unwrap_or(0).max(0) as usize;
            let file =
                StoredFile { path: path.clone(), file_hash: text("file_hash"), chunks, chunking: text(CHUNKING_KEY) };
            // Points of one file that disagree (a run stopped between two versions of it): it is read again.
            files
                .entry(path)
                .and_modify(|known| {
                    if *known != file {
                        known.chunking.clear();
                    }
                })
                .or_insert(file);
        })
        .await?;
        let mut files: Vec<StoredFile> = files.into_values().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok((ids, files))
    }

    /// One point of a record.
    fn point(&self, record: &EmbeddedChunk) -> Result<PointStruct, BackendError> {
        let mut payload = match serde_json::to_value(&record.chunk.metadata) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        payload.insert(DEFAULT_DOCUMENT_KEY.into(), Value::String(record.chunk.document.clone()));
        payload.insert(RECORD_ID_KEY.into(), Value::String(record.chunk.id.clone()));
        if let Some(chunking) = &self.target.chunking {
            payload.insert(CHUNKING_KEY.into(), Value::String(chunking.clone()));
        }
        let (vector, terms) = sparse::document_terms(&record.chunk.document, self.target.avg_tokens);
        payload.insert(TERMS_KEY.into(), Value::from(terms));
        let payload = Payload::try_from(Value::Object(payload))
            .map_err(|e| BackendError::new(STORE_NAME, format!("{UPSERT_OPERATION} failed: {e}")))?;
        let vectors = NamedVectors::default()
            .add_vector(self.target.dense_vector.clone(), Vector::new_dense(record.embedding.clone()))
            .add_vector(self.target.sparse_vector.clone(), Vector::from(vector));
        Ok(PointStruct::new(point_uuid(&record.chunk.id), vectors, payload))
    }
}

/// The indexer's view: record ids in, record ids out; the point ids are
/// derived from them.
#[async_trait]
impl IndexStore for QdrantIndex {
    fn name(&self) -> &str {
        STORE_NAME
    }

    fn max_batch_size(&self) -> usize {
        MAX_BATCH_SIZE
    }

    /// Scrolls the points whose `namespace_id` matches, reading only their
    /// record ids; empty when the collection does not exist.
    async fn namespace_ids(&self, namespace_id: &str) -> Result<Vec<String>, BackendError> {
        let mut ids = Vec::new();
        self.scroll_namespace(namespace_id, &[RECORD_ID_KEY], |payload| {
            // A point without a record id was not written by the indexer: not ours to list.
            ids.extend(payload.get(RECORD_ID_KEY).and_then(|v| v.as_str().cloned()));
        })
        .await?;
        Ok(ids)
    }

    async fn upsert(&self, records: &[EmbeddedChunk]) -> Result<(), BackendError> {
        let Some(first) = records.first() else { return Ok(()) };
        if let Some(r) = records.iter().find(|r| r.embedding.iter().any(|x| !x.is_finite())) {
            return Err(BackendError::new(
                STORE_NAME,
                format!("{UPSERT_OPERATION} failed: the embedding of {} is not finite", r.chunk.id),
            ));
        }
        self.create(first.embedding.len()).await?;
        let points = records.iter().map(|r| self.point(r)).collect::<Result<Vec<_>, _>>()?;
        let request = UpsertPoints {
            collection_name: self.target.collection.clone(),
            wait: Some(true),
            points,
            ..Default::default()
        };
        self.client
            .run(UPSERT_OPERATION, |client| {
                let request = request.clone();
                async move { client.upsert_points(request).await }
            })
            .await?;
        Ok(())
    }

    async fn delete(&self, ids: &[String]) -> Result<(), BackendError> {
        if ids.is_empty() || !self.exists().await? {
            return Ok(());
        }
        let request = DeletePoints {
            collection_name: self.target.collection.clone(),
            wait: Some(true),
            points: Some(PointsSelector {
                points_selector_one_of: Some(PointsSelectorOneOf::Points(PointsIdsList {
                    ids: ids.iter().map(|id| point_uuid(id).into()).collect(),
                })),
            }),
            ..Default::default()
        };
        self.client
            .run(DELETE_OPERATION, |client| {
                let request = request.clone();
                async move { client.delete_points(request).await }
            })
            .await?;
        Ok(())
    }
}
