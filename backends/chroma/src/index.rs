//! The write side: [`ChromaStore`] as the indexer's [`IndexStore`].
//!
//! Requests, all through the shared [`rr_http::HttpClient`] (retries,
//! timeouts, redaction) and named in errors as the reference indexer names
//! its steps (`Chroma upsert failed with HTTP 500: …`):
//!
//! - `GET /api/v2/pre-flight-checks` once per store: its `max_batch_size`
//!   becomes [`IndexStore::max_batch_size`] (100 when the server does not say);
//! - `GET .../collections/<name>` at the start of every namespace listing, so
//!   a sync never writes with an id cached before the collection was
//!   recreated; a 404 means an empty namespace, and nothing is created, so a
//!   dry run leaves the server as it was;
//! - `POST .../collections` with `get_or_create: true`, before the first
//!   upsert into a collection that does not exist yet, with the body the
//!   reference's Python client sends (`embedding_function: legacy`, no
//!   metadata, so Chroma's default `l2` space);
//! - `POST .../collections/<id>/get` with a `namespace_id` `$eq` filter,
//!   `include: []` and `limit`/`offset` paging;
//! - `POST .../collections/<id>/upsert` with ids, embeddings, documents and
//!   exactly the 22 schema metadata fields (integers as JSON integers);
//! - `POST .../collections/<id>/delete` with ids.
//!
//! Writes send the configured token only: there is no caller's header to
//! pass through when the indexer runs.

use async_trait::async_trait;
use rr_core::render::path_escape;
use rr_core::{BackendError, CallContext, EmbeddedChunk, IndexStore, Metadata};
use rr_http::HttpError;
use rr_http::json::{self, null_as_default};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::store::{ChromaError, ChromaStore, CollectionResponse, STORE_NAME};

/// The operation name of the pre-flight request in errors and logs.
pub const MAX_BATCH_SIZE_OPERATION: &str = "Chroma maximum batch size lookup";
/// The operation name of the collection's creation.
pub const CREATE_OPERATION: &str = "Chroma collection creation";
/// The operation name of a namespace listing page.
pub const NAMESPACE_OPERATION: &str = "Chroma namespace retrieval";
/// The operation name of an upsert.
pub const UPSERT_OPERATION: &str = "Chroma upsert";
/// The operation name of a delete.
pub const DELETE_OPERATION: &str = "Chroma delete";

/// The batch limit assumed when the server does not announce one.
pub const DEFAULT_MAX_BATCH_SIZE: usize = 100;

/// What `POST .../collections` carries, field for field as the Python client
/// of `chromadb` 1.5.9 sends it for `get_or_create_collection(name,
/// embedding_function=<custom>)`.
#[derive(Serialize)]
struct CreateBody<'a> {
    name: &'a str,
    metadata: Option<()>,
    configuration: CreateConfiguration,
    schema: Option<()>,
    get_or_create: bool,
}

/// `{"hnsw": null, "spann": null, "embedding_function": {"type": "legacy"}}`:
/// what the client sends for an embedding function of its own (the
/// reference's), so Chroma keeps its default index settings and `l2` space.
#[derive(Serialize)]
struct CreateConfiguration {
    hnsw: Option<()>,
    spann: Option<()>,
    embedding_function: EmbeddingFunctionConfig,
}

#[derive(Serialize)]
struct EmbeddingFunctionConfig {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct GetBody<'a> {
    #[serde(rename = "where")]
    where_clause: Value,
    limit: usize,
    offset: usize,
    include: [&'a str; 0],
}

#[derive(Debug, Default, Deserialize)]
struct GetResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    ids: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct PreFlightResponse {
    #[serde(default)]
    max_batch_size: Option<i64>,
}

/// A body whose content does not matter (`{}` after an upsert,
/// `{"deleted": n}` after a delete).
#[derive(Debug, Default, Deserialize)]
struct Ignored {}

/// The 22 metadata fields of record schema 1, nothing else.
#[derive(Serialize)]
struct RecordMetadata<'a> {
    schema_version: i64,
    namespace_id: &'a str,
    organization: &'a str,
    repository: &'a str,
    branch: &'a str,
    path: &'a str,
    file_name: &'a str,
    file_extension: &'a str,
    file_type: &'a str,
    language: &'a str,
    document_id: &'a str,
    file_hash: &'a str,
    chunk_hash: &'a str,
    chunk_index: i64,
    chunk_count: i64,
    chunking_strategy: &'a str,
    chunking_version: i64,
    start_line: i64,
    end_line: i64,
    section: &'a str,
    symbol: &'a str,
    indexed_commit_sha: &'a str,
}

impl<'a> From<&'a Metadata> for RecordMetadata<'a> {
    fn from(m: &'a Metadata) -> Self {
        RecordMetadata {
            schema_version: m.schema_version,
            namespace_id: &m.namespace_id,
            organization: &m.organization,
            repository: &m.repository,
            branch: &m.branch,
            path: &m.path,
            file_name: &m.file_name,
            file_extension: &m.file_extension,
            file_type: &m.file_type,
            language: &m.language,
            document_id: &m.document_id,
            file_hash: &m.file_hash,
            chunk_hash: &m.chunk_hash,
            chunk_index: m.chunk_index,
            chunk_count: m.chunk_count,
            chunking_strategy: &m.chunking_strategy,
            chunking_version: m.chunking_version,
            start_line: m.start_line,
            end_line: m.end_line,
            section: &m.section,
            symbol: &m.symbol,
            indexed_commit_sha: &m.indexed_commit_sha,
        }
    }
}

#[derive(Serialize)]
struct UpsertBody<'a> {
    ids: Vec<&'a str>,
    embeddings: Vec<&'a [f32]>,
    documents: Vec<&'a str>,
    metadatas: Vec<RecordMetadata<'a>>,
}

#[derive(Serialize)]
struct DeleteBody<'a> {
    ids: &'a [String],
}

impl ChromaStore {
    /// Ids per page when listing a namespace (at least 1; default
    /// [`DEFAULT_PAGE_SIZE`](crate::DEFAULT_PAGE_SIZE)).
    pub fn with_page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// The URL of `POST .../collections/<id>/<operation>` (`get`, `upsert`, `delete`).
    pub fn collection_operation_url(&self, id: &str, operation: &str) -> String {
        format!("{}/{}/{operation}", self.collections_url, path_escape(id))
    }

    /// Sends the configured token, never a caller's.
    pub(crate) fn write_authorization(&self) -> Option<&str> {
        self.authorization.as_deref().filter(|a| !a.is_empty())
    }

    fn set_cached_collection_id(&self, id: Option<String>) {
        *self.collection_id.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = id;
    }

    /// The server's batch limit: asked once, then cached. A server without
    /// the pre-flight endpoint (404) or without the field gets
    /// [`DEFAULT_MAX_BATCH_SIZE`]; any other failure is an error and nothing
    /// is cached.
    pub async fn fetch_max_batch_size(&self) -> Result<usize, ChromaError> {
        if let Some(&size) = self.max_batch_size.get() {
            return Ok(size);
        }
        let url = format!("{}/pre-flight-checks", self.api_url);
        let size = match self
            .http
            .get_json::<PreFlightResponse>(MAX_BATCH_SIZE_OPERATION, &url, self.write_authorization())
            .await
        {
            Ok(checks) => match checks.max_batch_size {
                Some(size) if size > 0 => usize::try_from(size).unwrap_or(usize::MAX),
                _ => DEFAULT_MAX_BATCH_SIZE,
            },
            Err(e) if e.status() == Some(404) => DEFAULT_MAX_BATCH_SIZE,
            Err(e) => return Err(e.into()),
        };
        Ok(*self.max_batch_size.get_or_init(|| size))
    }

    /// Looks the collection up: `None` (and nothing cached) when it does not exist.
    pub async fn find_collection(&self) -> Result<Option<String>, ChromaError> {
        match self.lookup_collection_id(&CallContext::default()).await {
            Ok(id) => Ok(Some(id)),
            Err(ChromaError::Http(e)) if e.status() == Some(404) => {
                self.set_cached_collection_id(None);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Creates the collection as the reference indexer does, or gets it when
    /// it exists; caches and returns its id.
    pub async fn create_collection(&self) -> Result<String, ChromaError> {
        let body = CreateBody {
            name: &self.collection_name,
            metadata: None,
            configuration: CreateConfiguration {
                hnsw: None,
                spann: None,
                embedding_function: EmbeddingFunctionConfig { kind: "legacy" },
            },
            schema: None,
            get_or_create: true,
        };
        let response: CollectionResponse =
            self.http.post_json(CREATE_OPERATION, &self.collections_url, &body, self.write_authorization()).await?;
        if response.id.is_empty() {
            return Err(ChromaError::NoCreatedCollectionId);
        }
        self.set_cached_collection_id(Some(response.id.clone()));
        Ok(response.id)
    }

    /// Every id whose `namespace_id` metadata is `namespace_id`, page by page;
    /// empty when the collection does not exist. Learns the batch limit first.
    pub async fn list_namespace(&self, namespace_id: &str) -> Result<Vec<String>, ChromaError> {
        self.fetch_max_batch_size().await?;
        let Some(id) = self.find_collection().await? else {
            return Ok(Vec::new());
        };
        let url = self.collection_operation_url(&id, "get");
        let mut ids = Vec::new();
        loop {
            let body = GetBody {
                where_clause: json!({"namespace_id": {"$eq": namespace_id}}),
                limit: self.page_size,
                offset: ids.len(),
                include: [],
            };
            let page: GetResponse =
                self.http.post_json(NAMESPACE_OPERATION, &url, &body, self.write_authorization()).await?;
            let full = page.ids.len() >= self.page_size;
            ids.extend(page.ids);
            if !full {
                return Ok(ids);
            }
        }
    }

    /// Inserts or replaces `records`, creating the collection first when it
    /// is not known yet.
    pub async fn upsert_records(&self, records: &[EmbeddedChunk]) -> Result<(), ChromaError> {
        if records.is_empty() {
            return Ok(());
        }
        // JSON has no NaN or infinity: serde_json would send null in their place.
        if let Some(detail) = json::non_finite(records.iter().flat_map(|r| r.embedding.iter().copied())) {
            return Err(HttpError::Encode { operation: UPSERT_OPERATION.to_owned(), detail }.into());
        }
        let id = match self.cached_collection_id() {
            Some(id) => id,
            None => self.create_collection().await?,
        };
        let body = UpsertBody {
            ids: records.iter().map(|r| r.chunk.id.as_str()).collect(),
            embeddings: records.iter().map(|r| r.embedding.as_slice()).collect(),
            documents: records.iter().map(|r| r.chunk.document.as_str()).collect(),
            metadatas: records.iter().map(|r| RecordMetadata::from(&r.chunk.metadata)).collect(),
        };
        let url = self.collection_operation_url(&id, "upsert");
        let _: Ignored = self.http.post_json(UPSERT_OPERATION, &url, &body, self.write_authorization()).await?;
        Ok(())
    }

    /// Removes records by id; a missing collection has nothing to remove.
    pub async fn delete_records(&self, ids: &[String]) -> Result<(), ChromaError> {
        if ids.is_empty() {
            return Ok(());
        }
        let id = match self.cached_collection_id() {
            Some(id) => id,
            None => match self.find_collection().await? {
                Some(id) => id,
                None => return Ok(()),
            },
        };
        let url = self.collection_operation_url(&id, "delete");
        let _: Ignored =
            self.http.post_json(DELETE_OPERATION, &url, &DeleteBody { ids }, self.write_authorization()).await?;
        Ok(())
    }
}

/// The indexer's view. Call order matters for one thing: the batch limit is
/// learnt by `namespace_ids`, which the indexer calls before it splits
/// batches; until then `max_batch_size` answers [`DEFAULT_MAX_BATCH_SIZE`].
#[async_trait]
impl IndexStore for ChromaStore {
    fn name(&self) -> &str {
        STORE_NAME
    }

    fn max_batch_size(&self) -> usize {
        self.max_batch_size.get().copied().unwrap_or(DEFAULT_MAX_BATCH_SIZE)
    }

    async fn namespace_ids(&self, namespace_id: &str) -> Result<Vec<String>, BackendError> {
        self.list_namespace(namespace_id).await.map_err(|e| BackendError::new(STORE_NAME, e))
    }

    async fn upsert(&self, records: &[EmbeddedChunk]) -> Result<(), BackendError> {
        self.upsert_records(records).await.map_err(|e| BackendError::new(STORE_NAME, e))
    }

    async fn delete(&self, ids: &[String]) -> Result<(), BackendError> {
        self.delete_records(ids).await.map_err(|e| BackendError::new(STORE_NAME, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_metadata_has_exactly_the_schema_fields() {
        let mut m = Metadata { chunk_index: 3, start_line: 7, ..Metadata::default() };
        m.extra.insert("custom".into(), json!("x"));
        let value = serde_json::to_value(RecordMetadata::from(&m)).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 22);
        assert!(!object.contains_key("custom"));
        assert_eq!(object["chunk_index"], json!(3));
        assert!(object["start_line"].is_i64());
    }
}
