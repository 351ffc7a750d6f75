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
//! `languages` is a `match any` on the metadata `language` key, applied by
//! Qdrant like `source`; `kinds` (source, tests, docs...) are a property of the
//! path that no payload condition expresses, so they are checked locally
//! like a glob.
//!
//! Qdrant's scores never reach the output: [`Candidate::distance`] holds
//! `-score` (lower is closer for cosine and dot product) only so that
//! callers can fuse or evaluate rankings.
//!
//! # Writing, and BM25 inside Qdrant
//!
//! [`QdrantIndex`] is the indexer's [`rr_core::IndexStore`]: each record
//! becomes a point with a named dense vector and a named sparse vector of
//! the record's BM25 term weights ([`sparse`]), with the collection's `IDF`
//! modifier supplying the inverse document frequency. A [`Target`] whose
//! [`Target::sparse_vector_name`] is set answers lexical queries over that
//! vector ([`LexicalStore`]), so the engine's `lexical` and `hybrid` modes
//! run over a collection the indexer wrote.

mod client;
mod index;
mod registry;
pub mod sparse;

pub use client::{INFO_OPERATION, QUERY_OPERATION, RetryPolicy, RetryingClient, STORE_NAME};
pub use index::{
    AVG_TOKENS_KEY, CREATE_OPERATION, DEFAULT_DENSE_VECTOR, DEFAULT_DOCUMENT_KEY, DEFAULT_SPARSE_VECTOR,
    DELETE_OPERATION, LIST_OPERATION, QdrantIndex, RECORD_ID_KEY, UPSERT_OPERATION, WriteTarget, point_uuid,
};

use std::collections::HashSet;

use async_trait::async_trait;
use qdrant_client::Qdrant;
use qdrant_client::qdrant::r#match::MatchValue;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::with_payload_selector::SelectorOptions;
use qdrant_client::qdrant::{
    Condition, Filter, GetCollectionInfoRequest, PayloadIncludeSelector, PointId, Query, QueryPoints, RepeatedStrings,
    ScoredPoint, VectorInput, WithPayloadSelector,
};
use rr_core::retrieval::{LexicalQuery, LexicalStore};
use rr_core::{
    BackendError, CallContext, Candidate, Chunk, Metadata, PathGlob, SearchFilter, VectorQuery, VectorStore,
};
use serde_json::{Map, Value};

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
    if !filter.languages.is_empty() {
        let languages = RepeatedStrings { strings: filter.languages.clone() };
        conditions.push(Condition::matches(layout.field_key("language"), MatchValue::Keywords(languages)));
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

/// Whether part of the filter (a glob with wildcards, kinds) is checked
/// locally, page after page.
pub fn filters_locally(filter: &SearchFilter) -> bool {
    local_glob(filter).is_some() || !filter.kinds.is_empty()
}

/// Points per request: `n_results` when the server filters everything,
/// else at least [`MIN_PAGE_SIZE`] (and 4 × `n_results`) so that a narrow
/// glob needs few round trips.
pub fn page_size(query: &VectorQuery) -> usize {
    sized_page(&query.filter, query.n_results)
}

fn sized_page(filter: &SearchFilter, n_results: usize) -> usize {
    if filters_locally(filter) { n_results.saturating_mul(4).max(MIN_PAGE_SIZE) } else { n_results }
}

/// Where and how to query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    pub collection: String,
    /// The named vector to search, for collections with several.
    pub vector_name: Option<String>,
    /// The named sparse vector of BM25 term weights ([`sparse`]), when the
    /// collection has one: the store then answers lexical queries.
    pub sparse_vector_name: Option<String>,
    pub layout: PayloadLayout,
}

/// What a query ranks by: the dense embedding, or the sparse vector of the
/// query's terms (over [`Target::sparse_vector_name`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Ranking {
    Dense(Vec<f32>),
    Sparse(Vec<(u32, f32)>),
}

impl Target {
    /// One page of the nearest-neighbour query: `limit` points from `offset`.
    pub fn request(&self, query: &VectorQuery, offset: usize, limit: usize) -> QueryPoints {
        self.ranked_request(&Ranking::Dense(query.embedding.clone()), &query.filter, offset, limit)
    }

    /// One page of a query ranked by `ranking`.
    pub fn ranked_request(&self, ranking: &Ranking, filter: &SearchFilter, offset: usize, limit: usize) -> QueryPoints {
        let (input, using) = match ranking {
            Ranking::Dense(embedding) => (VectorInput::from(embedding.clone()), self.vector_name.clone()),
            Ranking::Sparse(terms) => (VectorInput::from(terms.as_slice()), self.sparse_vector_name.clone()),
        };
        QueryPoints {
            collection_name: self.collection.clone(),
            query: Some(Query::from(input)),
            using,
            filter: build_filter(filter, &self.layout),
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
    run_ranked(source, target, &Ranking::Dense(query.embedding.clone()), &query.filter, query.n_results).await
}

/// [`run_query`] for any [`Ranking`].
pub async fn run_ranked(
    source: &dyn PageSource,
    target: &Target,
    ranking: &Ranking,
    filter: &SearchFilter,
    n_results: usize,
) -> Result<Vec<Candidate>, BackendError> {
    let local = filters_locally(filter);
    let limit = sized_page(filter, n_results).max(1);
    let mut out = Vec::with_capacity(n_results);
    let mut seen = HashSet::new();
    let mut offset = 0;
    loop {
        let page = source.page(target.ranked_request(ranking, filter, offset, limit)).await?;
        let exhausted = page.len() < limit;
        offset += page.len();
        for point in page {
            let c = candidate(point, &target.layout);
            if !seen.insert(c.chunk.id.clone()) {
                continue; // a point that moved between pages is counted once
            }
            // The server applied the rest; `matches` re-checks it at no cost.
            if !local || filter.matches(&c.chunk) {
                out.push(c);
                if out.len() == n_results {
                    return Ok(out);
                }
            }
        }
        if exhausted || !local {
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

    /// Lexical ranking over the sparse BM25 vector, when the target names one.
    fn lexical(&self) -> Option<&dyn LexicalStore> {
        self.target.sparse_vector_name.is_some().then_some(self as &dyn LexicalStore)
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

/// BM25 over the sparse vector: the query's terms as [`sparse::query_vector`]
/// makes them, Qdrant's IDF modifier, the same filters as a dense query.
#[async_trait]
impl LexicalStore for QdrantStore {
    async fn lexical_query(&self, query: &LexicalQuery, _ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        let terms = sparse::query_vector(&query.text);
        if terms.is_empty() || self.target.sparse_vector_name.is_none() {
            return Ok(Vec::new());
        }
        run_ranked(&self.client, &self.target, &Ranking::Sparse(terms), &query.filter, query.n_results).await
    }
}

#[cfg(test)]
mod tests;
