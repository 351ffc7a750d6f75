//! Qdrant (gRPC, `qdrant-client`) as a [`VectorStore`].
//!
//! The store reads collections whose points carry the payload of a Chroma
//! record: the document text (with its `Source:` line) under
//! [`PayloadLayout::document_key`] and the metadata fields either flat at the
//! top level of the payload (the default) or nested under
//! [`PayloadLayout::metadata_key`]. The point id becomes the chunk id.
//!
//! # Filters before ranking, without losing results
//!
//! `source` is exact equality on `organization`, `repository` and `branch`,
//! which Qdrant expresses natively: each non-empty field becomes a `must`
//! `match` condition, so Qdrant filters before it ranks.
//!
//! The `path` glob is a regular expression over the document's `Source:`
//! line (`*` crosses folders), which Qdrant's payload conditions cannot
//! express. So:
//!
//! - a pattern without wildcards (`docs/café.md`, `/README.md`) is an exact
//!   path: it becomes one more `must` `match` on the metadata `path` key and
//!   Qdrant filters it before ranking, like `source`;
//! - any other pattern (`docs/*`, `**/*.go`, `config?.yaml`) sends no path
//!   condition. The store asks for results in similarity order, page after
//!   page (`query` with `limit` and `offset`, the `source` conditions still
//!   applied by the server), keeps the points whose document passes
//!   [`PathGlob::matches_document`] (the very expression Chroma evaluates),
//!   and stops once `n_results` have matched or a short page shows the
//!   collection is exhausted. Matches therefore come out in the same order
//!   and number as if Qdrant had filtered first; a narrow glob only costs
//!   more pages (each page is [`page_size`] points).
//!
//! One deliberate difference for exact paths: Chroma's expression lets the
//! `Source:` prefix absorb a `:` (`x:docs/a.md` matches `docs/a.md` there),
//! the payload condition compares the whole `path` field.
//!
//! Qdrant's scores never reach the output: [`Candidate::distance`] holds
//! `-score` (lower is closer for cosine and dot product) only so that
//! callers can fuse or evaluate rankings.

mod registry;

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use qdrant_client::qdrant::r#match::MatchValue;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::with_payload_selector::SelectorOptions;
use qdrant_client::qdrant::{
    Condition, Filter, GetCollectionInfoRequest, PayloadIncludeSelector, PointId, Query, QueryPoints, ScoredPoint,
    VectorInput, WithPayloadSelector,
};
use qdrant_client::{Qdrant, QdrantError};
use rr_core::{
    BackendError, CallContext, Candidate, Chunk, Metadata, PathGlob, SearchFilter, VectorQuery, VectorStore,
};
use serde_json::{Map, Value};
use tonic::Code;

/// The `name()` of the store.
pub const STORE_NAME: &str = "qdrant";
/// The operation name of a query in errors.
pub const QUERY_OPERATION: &str = "Qdrant query";
/// The operation name of the collection lookup in errors.
pub const INFO_OPERATION: &str = "Qdrant collection info";
/// The default payload key of the document text.
pub const DEFAULT_DOCUMENT_KEY: &str = "document";
/// The smallest page asked for while a path glob is filtered locally.
pub const MIN_PAGE_SIZE: usize = 64;

/// Where the document text and the metadata sit in a point's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadLayout {
    /// The payload key of the document text.
    pub document_key: String,
    /// `None`: metadata fields are top-level payload keys (every key but the
    /// document's). `Some(k)`: they are an object under `k`.
    pub metadata_key: Option<String>,
}

impl Default for PayloadLayout {
    fn default() -> Self {
        PayloadLayout { document_key: DEFAULT_DOCUMENT_KEY.to_owned(), metadata_key: None }
    }
}

impl PayloadLayout {
    /// The payload key (a dotted path when nested) of one metadata field.
    pub fn field_key(&self, field: &str) -> String {
        match &self.metadata_key {
            Some(k) => format!("{k}.{field}"),
            None => field.to_owned(),
        }
    }

    /// The payload to ask for: everything when metadata is flat (its keys
    /// are not known in advance), else only the document and metadata keys.
    pub fn payload_selector(&self) -> WithPayloadSelector {
        match &self.metadata_key {
            None => true.into(),
            Some(k) => WithPayloadSelector {
                selector_options: Some(SelectorOptions::Include(PayloadIncludeSelector {
                    fields: vec![self.document_key.clone(), k.clone()],
                })),
            },
        }
    }

    /// A chunk from a point's id and payload (lenient like
    /// [`Metadata::from_map`]: a missing or odd field reads as empty).
    pub fn chunk(&self, id: String, mut payload: Map<String, Value>) -> Chunk {
        let document = match payload.remove(&self.document_key) {
            Some(Value::String(s)) => s,
            _ => String::new(),
        };
        let metadata = match &self.metadata_key {
            None => Metadata::from_map(payload),
            Some(k) => match payload.remove(k) {
                Some(Value::Object(m)) => Metadata::from_map(m),
                _ => Metadata::default(),
            },
        };
        Chunk { id, document, metadata }
    }
}

/// Whether a glob is an exact path (no `*`, no `?`) that a payload `match` expresses.
pub fn is_exact_path(glob: &PathGlob) -> bool {
    !glob.pattern().contains(['*', '?'])
}

/// The server-side filter: `must` matches on the non-empty `source` fields and,
/// for an exact path, on the path key. `None` when there is no condition.
pub fn build_filter(filter: &SearchFilter, layout: &PayloadLayout) -> Option<Filter> {
    let mut conditions: Vec<Condition> = filter
        .metadata_equalities()
        .into_iter()
        .map(|(field, value)| keyword(layout.field_key(field), value))
        .collect();
    if let Some(glob) = filter.path.as_ref().filter(|g| is_exact_path(g)) {
        conditions.push(keyword(layout.field_key("path"), glob.pattern()));
    }
    (!conditions.is_empty()).then(|| Filter::must(conditions))
}

/// Exact equality. Spelled out as `Keyword`: `qdrant-client` turns a string
/// containing whitespace into a full-text `Text` match, which is not equality.
fn keyword(key: String, value: &str) -> Condition {
    Condition::matches(key, MatchValue::Keyword(value.to_owned()))
}

/// The glob left to check locally, when the server cannot express it.
pub fn local_glob(filter: &SearchFilter) -> Option<&PathGlob> {
    filter.path.as_ref().filter(|g| !is_exact_path(g))
}

/// Points per request: `n_results` when the server filters everything,
/// else at least [`MIN_PAGE_SIZE`] (and 4 × `n_results`) so that a narrow
/// glob needs few round trips.
pub fn page_size(query: &VectorQuery) -> usize {
    if local_glob(&query.filter).is_some() {
        query.n_results.saturating_mul(4).max(MIN_PAGE_SIZE)
    } else {
        query.n_results
    }
}

/// Where and how to query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    pub collection: String,
    /// The named vector to search, for collections with several.
    pub vector_name: Option<String>,
    pub layout: PayloadLayout,
}

impl Target {
    /// One page of the nearest-neighbour query: `limit` points from `offset`.
    pub fn request(&self, query: &VectorQuery, offset: usize, limit: usize) -> QueryPoints {
        QueryPoints {
            collection_name: self.collection.clone(),
            query: Some(Query::from(VectorInput::from(query.embedding.clone()))),
            using: self.vector_name.clone(),
            filter: build_filter(&query.filter, &self.layout),
            limit: Some(limit as u64),
            offset: (offset > 0).then_some(offset as u64),
            with_payload: Some(self.layout.payload_selector()),
            with_vectors: Some(false.into()),
            ..Default::default()
        }
    }
}

/// One page of query results; the seam that lets the paging be tested without a server.
#[async_trait]
pub trait PageSource: Send + Sync {
    async fn page(&self, request: QueryPoints) -> Result<Vec<ScoredPoint>, BackendError>;
}

#[async_trait]
impl PageSource for Qdrant {
    async fn page(&self, request: QueryPoints) -> Result<Vec<ScoredPoint>, BackendError> {
        self.query(request)
            .await
            .map(|r| r.result)
            .map_err(|e| BackendError::new(STORE_NAME, format!("{QUERY_OPERATION} failed: {e}")))
    }
}

/// How often and how patiently a failed request is repeated.
///
/// Only failures that a later attempt can cure are retried (the server
/// unavailable or overloaded, a deadline or an aborted transaction); a
/// missing collection or a bad filter fails at once. The delays follow the
/// HTTP backends' schedule: `base`, doubling per attempt, at most 16 × `base`
/// (0.5 s … 8 s by default); Qdrant's own `retry-after` wins when it is
/// longer, up to the same ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, including the first; 0 counts as 1.
    pub attempts: u32,
    pub base: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 3, base: Duration::from_millis(500) }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let ceiling = self.base * 16;
        let backoff = (self.base * (1u32 << attempt.saturating_sub(1).min(4))).min(ceiling);
        retry_after.map_or(backoff, |r| r.max(backoff).min(ceiling))
    }
}

/// Whether a later attempt may succeed, and how long Qdrant asked to wait.
fn transient(error: &QdrantError) -> Option<Option<Duration>> {
    match error {
        QdrantError::ResourceExhaustedError { retry_after_seconds, .. } => {
            Some(Some(Duration::from_secs(*retry_after_seconds)))
        }
        QdrantError::ResponseError { status } => matches!(
            status.code(),
            Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted
        )
        .then_some(None),
        _ => None,
    }
}

/// A client that repeats transient failures (see [`RetryPolicy`]).
pub struct RetryingClient {
    client: Qdrant,
    policy: RetryPolicy,
}

impl RetryingClient {
    pub fn new(client: Qdrant, policy: RetryPolicy) -> Self {
        RetryingClient { client, policy }
    }

    /// Runs `call` until it succeeds, fails for good, or the attempts run out.
    async fn run<T, F, Fut>(&self, operation: &str, mut call: F) -> Result<T, BackendError>
    where
        F: FnMut(Qdrant) -> Fut,
        Fut: Future<Output = Result<T, QdrantError>>,
    {
        let attempts = self.policy.attempts.max(1);
        let mut attempt = 1;
        loop {
            match call(self.client.clone()).await {
                Ok(value) => return Ok(value),
                Err(e) => match transient(&e) {
                    Some(retry_after) if attempt < attempts => {
                        tokio::time::sleep(self.policy.delay(attempt, retry_after)).await;
                        attempt += 1;
                    }
                    _ => return Err(BackendError::new(STORE_NAME, format!("{operation} failed: {e}"))),
                },
            }
        }
    }
}

#[async_trait]
impl PageSource for RetryingClient {
    async fn page(&self, request: QueryPoints) -> Result<Vec<ScoredPoint>, BackendError> {
        self.run(QUERY_OPERATION, |client| {
            let request = request.clone();
            async move { client.query(request).await.map(|r| r.result) }
        })
        .await
    }
}

/// The point id as text: the UUID or the number.
pub fn point_id_string(id: Option<&PointId>) -> String {
    match id.and_then(|p| p.point_id_options.as_ref()) {
        Some(PointIdOptions::Uuid(u)) => u.clone(),
        Some(PointIdOptions::Num(n)) => n.to_string(),
        None => String::new(),
    }
}

/// A candidate from a scored point.
pub fn candidate(point: ScoredPoint, layout: &PayloadLayout) -> Candidate {
    let id = point_id_string(point.id.as_ref());
    let payload: Map<String, Value> = point.payload.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
    Candidate { chunk: layout.chunk(id, payload), distance: Some(-f64::from(point.score)) }
}

/// Runs `query` against `source`: one request when the server filters
/// everything, else pages in similarity order with the glob applied
/// locally until `n_results` match or the collection is exhausted.
pub async fn run_query(
    source: &dyn PageSource,
    target: &Target,
    query: &VectorQuery,
) -> Result<Vec<Candidate>, BackendError> {
    let glob = local_glob(&query.filter);
    let limit = page_size(query).max(1);
    let mut out = Vec::with_capacity(query.n_results);
    let mut seen = HashSet::new();
    let mut offset = 0;
    loop {
        let page = source.page(target.request(query, offset, limit)).await?;
        let exhausted = page.len() < limit;
        offset += page.len();
        for point in page {
            let c = candidate(point, &target.layout);
            if !seen.insert(c.chunk.id.clone()) {
                continue; // a point that moved between pages is counted once
            }
            if glob.is_none_or(|g| g.matches_document(&c.chunk.document)) {
                out.push(c);
                if out.len() == query.n_results {
                    return Ok(out);
                }
            }
        }
        if exhausted || glob.is_none() {
            return Ok(out);
        }
    }
}

/// A Qdrant collection as a [`VectorStore`].
pub struct QdrantStore {
    client: RetryingClient,
    target: Target,
}

impl std::fmt::Debug for QdrantStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdrantStore").field("target", &self.target).finish_non_exhaustive()
    }
}

impl QdrantStore {
    /// A store over an already built client (which connects lazily), with
    /// the default [`RetryPolicy`].
    pub fn new(client: Qdrant, target: Target) -> Self {
        Self::with_retry(client, target, RetryPolicy::default())
    }

    pub fn with_retry(client: Qdrant, target: Target, policy: RetryPolicy) -> Self {
        QdrantStore { client: RetryingClient::new(client, policy), target }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }
}

#[async_trait]
impl VectorStore for QdrantStore {
    fn name(&self) -> &str {
        STORE_NAME
    }

    async fn query(&self, query: &VectorQuery, _ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        run_query(&self.client, &self.target, query).await
    }

    /// The size of the searched vector (the named one when configured).
    async fn dimension(&self, _ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        let collection_name = self.target.collection.clone();
        let info = self
            .client
            .run(INFO_OPERATION, |client| {
                let request = GetCollectionInfoRequest { collection_name: collection_name.clone() };
                async move { client.collection_info(request).await }
            })
            .await?;
        let config = info.result.and_then(|r| r.config).and_then(|c| c.params).and_then(|p| p.vectors_config);
        let size = match config.and_then(|c| c.config) {
            Some(VectorsConfigKind::Params(p)) if self.target.vector_name.is_none() => Some(p.size),
            Some(VectorsConfigKind::ParamsMap(m)) => {
                self.target.vector_name.as_ref().and_then(|n| m.map.get(n)).map(|p| p.size)
            }
            _ => None,
        };
        Ok(size.map(|s| s as usize))
    }
}

#[cfg(test)]
mod tests;
