//! Chroma's v2 HTTP API as a [`VectorStore`].
//!
//! A search is two requests, as in the reference server: resolve the
//! collection's id from its name (`GET .../collections/<name>`), then query it
//! (`POST .../collections/<id>/query`) with the metadata equalities in `where`
//! and the path glob as a `$regex` on the document text in `where_document`,
//! so Chroma filters *before* ranking.
//!
//! # The collection id is cached, without changing any answer
//!
//! The reference looks the id up on every search. We keep it after the first
//! successful lookup, which saves a round trip per search, but a client must
//! not be able to tell: every error text has to be the one the reference
//! would have produced. So when a query made with a *cached* id fails in any
//! way (an HTTP status, a transport error, a bad body), the cache is dropped
//! and the lookup redone, which is the request the reference would have made
//! first:
//!
//! - the lookup fails → its error is returned, exactly what the reference
//!   would have said;
//! - the id changed (the collection was deleted and recreated) → the query
//!   runs again with the new id and its outcome is the answer;
//! - the id is the same → the original query error is returned, which is
//!   what the reference's query would have returned too.
//!
//! A query that fails right after a fresh lookup is returned as it is: the
//! reference would not have looked up twice either.
//!
//! # Writing
//!
//! [`ChromaStore`] is also the indexer's [`rr_core::IndexStore`] (module
//! `index`): it creates the collection as the reference indexer does, lists a
//! namespace's ids page by page, and upserts and deletes by id. See
//! [`ChromaStore::namespace_ids`](rr_core::IndexStore::namespace_ids) for the
//! order in which it learns the server's batch limit.
//!
//! # Reading a collection back
//!
//! [`ChromaStore::all_ids`] and [`ChromaStore::all_records`] (module `read`)
//! page through the whole collection, for the navigation tools, which
//! rebuild files from the chunks.

mod index;
mod read;
mod registry;
mod reply;

use std::sync::{Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use rr_core::render::path_escape;
use rr_core::{BackendError, CallContext, Candidate, Chunk, SearchFilter, VectorQuery, VectorStore};
use rr_http::json::{self, null_as_default};
use rr_http::{HttpClient, HttpError, bearer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The operation name of the collection lookup in errors and logs.
pub const LOOKUP_OPERATION: &str = "Chroma collection lookup";
/// The operation name of the query in errors and logs.
pub const QUERY_OPERATION: &str = "Chroma query";
/// The `name()` of the store, as a [`VectorStore`] and as an index store.
pub const STORE_NAME: &str = "chroma";

pub use read::READ_OPERATION;

pub use index::{
    CREATE_OPERATION, DEFAULT_MAX_BATCH_SIZE, DEFAULT_PAGE_SIZE, DELETE_OPERATION, MAX_BATCH_SIZE_OPERATION,
    NAMESPACE_OPERATION, UPSERT_OPERATION,
};

/// Where the collection lives and how to authenticate.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ChromaConfig {
    /// Origin of the Chroma server, without a trailing `/`.
    pub server_url: String,
    pub tenant: String,
    pub database: String,
    pub collection_name: String,
    /// Sent as `Bearer <token>` (or as is when it already has the scheme).
    /// When absent, the caller's `Authorization` header is passed through.
    pub bearer_token: Option<String>,
}

impl std::fmt::Debug for ChromaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChromaConfig")
            .field("server_url", &self.server_url)
            .field("tenant", &self.tenant)
            .field("database", &self.database)
            .field("collection_name", &self.collection_name)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What can go wrong talking to Chroma.
#[derive(Debug, thiserror::Error)]
pub enum ChromaError {
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The lookup succeeded but named no collection.
    #[error("Chroma collection lookup returned no collection ID")]
    NoCollectionId,
    /// Creating (or getting) the collection succeeded but named no collection.
    #[error("Chroma collection creation returned no collection ID")]
    NoCreatedCollectionId,
}

impl ChromaError {
    /// The error without URLs or Chroma's reply text (see [`HttpError::summary`]).
    pub fn summary(&self) -> String {
        match self {
            ChromaError::Http(e) => e.summary(),
            other => other.to_string(),
        }
    }
}

/// A Chroma collection searched through the v2 API.
pub struct ChromaStore {
    http: HttpClient,
    /// `<server>/api/v2`.
    api_url: String,
    collection_url: String,
    collections_url: String,
    collection_name: String,
    authorization: Option<String>,
    collection_id: Mutex<Option<String>>,
    /// The server's `max_batch_size`, once asked (see the `index` module).
    max_batch_size: OnceLock<usize>,
    /// Ids per page when listing a namespace.
    page_size: usize,
}

impl std::fmt::Debug for ChromaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChromaStore").field("collection_url", &self.collection_url).finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
struct CollectionResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    id: String,
    // Unused, but Go decodes it too, so a malformed name fails the same way.
    #[serde(default, deserialize_with = "null_as_default")]
    #[allow(dead_code)]
    name: String,
}

#[derive(Serialize)]
struct QueryBody<'a> {
    query_embeddings: [&'a [f32]; 1],
    n_results: usize,
    #[serde(rename = "where", skip_serializing_if = "Option::is_none")]
    where_clause: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    where_document: Option<Value>,
    include: [&'static str; 3],
}

/// Chroma answers one list per query embedding; we send one.
#[derive(Debug, Default, Deserialize)]
struct QueryResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    ids: Vec<Option<Vec<Option<String>>>>,
    #[serde(default, deserialize_with = "null_as_default")]
    documents: Vec<Option<Vec<Option<String>>>>,
    #[serde(default, deserialize_with = "null_as_default")]
    metadatas: Vec<Option<Vec<Value>>>,
    #[serde(default, deserialize_with = "null_as_default")]
    distances: Vec<Option<Vec<Option<f64>>>>,
}

impl QueryResponse {
    /// Candidates in Chroma's order (closest first). The reply must hold one
    /// list per field (one query embedding was sent, and all three fields
    /// were asked for), all as long as the ids; a `null` document or distance
    /// inside a list reads as empty, as does a `null` metadata (a record
    /// written without one).
    fn into_candidates(self) -> Result<Vec<Candidate>, HttpError> {
        fn only<T>(name: &str, lists: Vec<Option<Vec<T>>>) -> Result<Vec<T>, HttpError> {
            let count = lists.len();
            match <[Option<Vec<T>>; 1]>::try_from(lists) {
                Ok([Some(list)]) => Ok(list),
                Ok([None]) => Err(reply::malformed(QUERY_OPERATION, format!("`{name}` holds null instead of a list"))),
                Err(_) => Err(reply::malformed(
                    QUERY_OPERATION,
                    format!("`{name}` holds {count} lists for 1 query embedding"),
                )),
            }
        }
        let ids = only("ids", self.ids)?;
        let documents = only("documents", self.documents)?;
        let metadatas = only("metadatas", self.metadatas)?;
        let distances = only("distances", self.distances)?;
        reply::same_lengths(
            QUERY_OPERATION,
            ids.len(),
            &[("documents", documents.len()), ("metadatas", metadatas.len()), ("distances", distances.len())],
        )?;
        ids.into_iter()
            .zip(documents)
            .zip(metadatas)
            .zip(distances)
            .enumerate()
            .map(|(i, (((id, document), metadata), distance))| {
                Ok(Candidate {
                    chunk: Chunk {
                        id: id.unwrap_or_default(),
                        document: document.unwrap_or_default(),
                        metadata: reply::metadata(QUERY_OPERATION, i, metadata)?,
                    },
                    distance,
                })
            })
            .collect()
    }
}

/// `where`: one `$eq` clause per non-empty field, alone or under `$and`.
pub fn where_clause(filter: &SearchFilter) -> Option<Value> {
    let mut clauses: Vec<Value> =
        filter.metadata_equalities().into_iter().map(|(field, value)| json!({ field: { "$eq": value } })).collect();
    match clauses.len() {
        0 => None,
        1 => clauses.pop(),
        _ => Some(json!({ "$and": clauses })),
    }
}

/// `where_document`: the path glob as a regular expression on the document's
/// `Source:` line.
pub fn where_document(filter: &SearchFilter) -> Option<Value> {
    filter.path.as_ref().map(|glob| json!({ "$regex": glob.document_regex() }))
}

impl ChromaStore {
    /// A store for `config`, sending through `http`. The configured bearer
    /// token is added to the client's secrets.
    pub fn new(config: ChromaConfig, http: HttpClient) -> Self {
        let token = config.bearer_token.clone().unwrap_or_default();
        let server = config.server_url.trim_end_matches('/');
        let collections_url = format!(
            "{server}/api/v2/tenants/{}/databases/{}/collections",
            path_escape(&config.tenant),
            path_escape(&config.database)
        );
        ChromaStore {
            http: http.with_secret(&token),
            api_url: format!("{server}/api/v2"),
            collection_url: format!("{collections_url}/{}", path_escape(&config.collection_name)),
            collection_name: config.collection_name,
            collections_url,
            authorization: bearer(&token),
            collection_id: Mutex::new(None),
            max_batch_size: OnceLock::new(),
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// The URL of the collection lookup.
    pub fn collection_url(&self) -> &str {
        &self.collection_url
    }

    /// The URL of a query against collection `id`.
    pub fn query_url(&self, id: &str) -> String {
        format!("{}/{}/query", self.collections_url, path_escape(id))
    }

    /// The configured token, else the caller's header verbatim; never empty.
    fn authorization<'a>(&'a self, ctx: &'a CallContext) -> Option<&'a str> {
        self.authorization.as_deref().or(ctx.authorization.as_deref()).filter(|a| !a.is_empty())
    }

    /// The cached collection id, if a lookup has succeeded and nothing has
    /// failed with it since.
    pub fn cached_collection_id(&self) -> Option<String> {
        self.collection_id.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Forgets the cached id if it is still `id` (another search may have
    /// refreshed it meanwhile).
    fn forget(&self, id: &str) {
        let mut cached = self.collection_id.lock().unwrap_or_else(PoisonError::into_inner);
        if cached.as_deref() == Some(id) {
            *cached = None;
        }
    }

    /// Looks the collection up (always a request) and caches its id.
    pub async fn lookup_collection_id(&self, ctx: &CallContext) -> Result<String, ChromaError> {
        let response: CollectionResponse =
            self.http.get_json(LOOKUP_OPERATION, &self.collection_url, self.authorization(ctx)).await?;
        if response.id.is_empty() {
            return Err(ChromaError::NoCollectionId);
        }
        *self.collection_id.lock().unwrap_or_else(PoisonError::into_inner) = Some(response.id.clone());
        Ok(response.id)
    }

    async fn query_collection(
        &self,
        id: &str,
        query: &VectorQuery,
        ctx: &CallContext,
    ) -> Result<Vec<Candidate>, ChromaError> {
        // JSON has no NaN or infinity: serde_json would send null in their place.
        if let Some(detail) = json::non_finite(query.embedding.iter().copied()) {
            return Err(HttpError::Encode { operation: QUERY_OPERATION.to_owned(), detail }.into());
        }
        let body = QueryBody {
            query_embeddings: [&query.embedding],
            n_results: query.n_results,
            where_clause: where_clause(&query.filter),
            where_document: where_document(&query.filter),
            include: ["documents", "metadatas", "distances"],
        };
        let response: QueryResponse =
            self.http.post_json(QUERY_OPERATION, &self.query_url(id), &body, self.authorization(ctx)).await?;
        Ok(response.into_candidates()?)
    }

    /// Runs `query`, resolving (or reusing) the collection id as the crate
    /// docs describe.
    pub async fn search(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, ChromaError> {
        let Some(cached) = self.cached_collection_id() else {
            let id = self.lookup_collection_id(ctx).await?;
            return self.query_collection(&id, query, ctx).await;
        };
        let error = match self.query_collection(&cached, query, ctx).await {
            Ok(candidates) => return Ok(candidates),
            Err(error) => error,
        };
        tracing::debug!(collection_id = %cached, "query with the cached collection id failed; looking the collection up again");
        self.forget(&cached);
        let fresh = self.lookup_collection_id(ctx).await?;
        if fresh == cached {
            return Err(error);
        }
        tracing::debug!(old = %cached, new = %fresh, "the collection id changed; querying again");
        self.query_collection(&fresh, query, ctx).await
    }
}

#[async_trait]
impl VectorStore for ChromaStore {
    fn name(&self) -> &str {
        STORE_NAME
    }

    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        self.search(query, ctx).await.map_err(|e| {
            let summary = e.summary();
            BackendError::new(STORE_NAME, e).with_summary(summary)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rr_core::{Metadata, PathGlob};

    fn filter(org: &str, repo: &str, branch: &str, path: &str) -> SearchFilter {
        SearchFilter {
            organization: org.into(),
            repository: repo.into(),
            branch: branch.into(),
            path: PathGlob::new(path),
        }
    }

    #[test]
    fn where_clauses_follow_the_reference() {
        assert_eq!(where_clause(&filter("", "", "", "")), None);
        assert_eq!(where_clause(&filter("", "", "main", "")), Some(json!({"branch": {"$eq": "main"}})));
        assert_eq!(
            where_clause(&filter("Acme", "widgets", "", "")),
            Some(json!({"$and": [{"organization": {"$eq": "Acme"}}, {"repository": {"$eq": "widgets"}}]}))
        );
        assert_eq!(where_document(&filter("", "", "", "")), None);
        assert_eq!(
            where_document(&filter("", "", "", "/docs/*")),
            Some(json!({"$regex": "^Source: [^\\n]+:docs/.*(?:\\n|$)"}))
        );
    }

    fn candidates(body: &str) -> Result<Vec<Candidate>, String> {
        let response: QueryResponse = json::decode(body.as_bytes()).map_err(|e| e.to_string())?;
        response.into_candidates().map_err(|e| e.to_string())
    }

    #[test]
    fn responses_tolerate_nulls_inside_the_lists() {
        let c = candidates(
            r#"{"ids":[["a","b",null]],"documents":[["doc a",null,"c"]],"metadatas":[[{"path":"x.go","start_line":3},null,{}]],
                "distances":[[0.25,null,0.5]],"embeddings":null,"included":["documents"]}"#,
        )
        .unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].chunk.id.as_str(), c[0].chunk.document.as_str()), ("a", "doc a"));
        assert_eq!((c[0].chunk.metadata.path.as_str(), c[0].chunk.metadata.start_line), ("x.go", 3));
        assert_eq!(c[0].distance, Some(0.25));
        assert_eq!((c[1].chunk.document.as_str(), c[1].distance), ("", None));
        assert_eq!(c[1].chunk.metadata, Metadata::default());
        assert_eq!(c[2].chunk.id, "");
        let empty = r#"{"ids":[[]],"documents":[[]],"metadatas":[[]],"distances":[[]]}"#;
        assert!(candidates(empty).unwrap().is_empty());
    }

    /// Issue 12: the malformed-reply table. Each reply a lenient reader
    /// turned into "no results" or a `/@` result is an error naming what
    /// was wrong.
    #[test]
    fn issue12_malformed_replies_are_errors() {
        let prefix = "Chroma query returned a malformed reply: ";
        let table = [
            ("{}", "`ids` holds 0 lists for 1 query embedding"),
            ("null", "`ids` holds 0 lists for 1 query embedding"),
            (r#"{"ids":[null]}"#, "`ids` holds null instead of a list"),
            (r#"{"ids":[["a"]]}"#, "`documents` holds 0 lists for 1 query embedding"),
            (
                r#"{"ids":[["a"],["b"]],"documents":[["d"]],"metadatas":[[{}]],"distances":[[1]]}"#,
                "`ids` holds 2 lists for 1 query embedding",
            ),
            (
                r#"{"ids":[["a","b"]],"documents":[["d"]],"metadatas":[[{},{}]],"distances":[[1,2]]}"#,
                "2 ids but 1 documents",
            ),
            (r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[[]],"distances":[[1]]}"#, "1 ids but 0 metadatas"),
            (r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[[{}]],"distances":[[1,2]]}"#, "1 ids but 2 distances"),
            (
                r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[["x"]],"distances":[[1]]}"#,
                "metadata 0 is a string, not an object",
            ),
            (
                r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[[{"organization":1,"repository":[],"branch":{}}]],"distances":[[1]]}"#,
                "metadata 0 field `organization` is a number, not a string",
            ),
            (
                r#"{"ids":[["a","b"]],"documents":[["d","e"]],"metadatas":[[{},{"end_line":true}]],"distances":[[1,2]]}"#,
                "metadata 1 field `end_line` is a boolean, not a number",
            ),
        ];
        for (body, detail) in table {
            assert_eq!(candidates(body).unwrap_err(), format!("{prefix}{detail}"), "{body}");
        }
    }

    #[test]
    fn config_debug_hides_the_token() {
        let config = ChromaConfig { bearer_token: Some("tok-123".into()), ..Default::default() };
        assert!(!format!("{config:?}").contains("tok-123"));
    }
}
