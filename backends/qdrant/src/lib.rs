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
//!
//! # What the engine reads besides the rankings
//!
//! The engine reads a hybrid ranking's head again with the document
//! frequencies of the query's tokens, and adds the chunks of the files a
//! query names to what the code ranking reads. Qdrant answers both from
//! payload indexes the indexer creates, so they stay right under
//! incremental writes and across shards:
//!
//! - [`LexicalStore::term_statistics`]: one exact `count` of the points
//!   whose [`TERMS_KEY`] list holds each token, and one of all points, run
//!   concurrently; answered only when the collection has a keyword index
//!   on [`TERMS_KEY`] (a collection the indexer did not create has none,
//!   and its head keeps the fused order);
//! - [`LexicalStore::named_files`]: the distinct paths under the filter, a
//!   `facet` over the keyword-indexed `path` field, each scored by
//!   [`rr_core::code_rank::names_file`] as the embedded store scores its
//!   files; then the chunks of the best [`NAMED_FILES`] files in one
//!   filtered scroll, in line order, at most [`CHUNKS_PER_NAMED_FILE`] of
//!   each. Answered only when `path` is keyword-indexed.

mod client;
mod index;
mod registry;
pub mod sparse;

pub use client::{
    COUNT_OPERATION, FACET_OPERATION, INFO_OPERATION, QUERY_OPERATION, RetryPolicy, RetryingClient, STORE_NAME,
};
pub use index::{
    AVG_TOKENS_KEY, CHUNKING_KEY, CREATE_OPERATION, DEFAULT_DENSE_VECTOR, DEFAULT_DOCUMENT_KEY, DEFAULT_SPARSE_VECTOR,
    DELETE_OPERATION, LIST_OPERATION, QdrantIndex, RECORD_ID_KEY, StoredFile, TERMS_KEY, UPSERT_OPERATION, WriteTarget,
    point_uuid,
};

use std::collections::HashSet;

use async_trait::async_trait;
use qdrant_client::Qdrant;
use qdrant_client::qdrant::facet_value::Variant as FacetVariant;
use qdrant_client::qdrant::r#match::MatchValue;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::with_payload_selector::SelectorOptions;
use qdrant_client::qdrant::{
    Condition, CountPoints, FacetCounts, Filter, GetCollectionInfoRequest, PayloadIncludeSelector, PointId, Query,
    QueryPoints, RepeatedStrings, ScoredPoint, ScrollPoints, VectorInput, WithPayloadSelector,
};
use rr_core::code_rank::{CHUNKS_PER_NAMED_FILE, NAMED_FILES};
use rr_core::paths::PathClass;
use rr_core::retrieval::{LexicalQuery, LexicalStore};
use rr_core::traits::TermStatistics;
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
    /// The indexer's term list ([`TERMS_KEY`]) is no metadata and is left out.
    pub fn chunk(&self, id: String, mut payload: Map<String, Value>) -> Chunk {
        let document = match payload.remove(&self.document_key) {
            Some(Value::String(s)) => s,
            _ => String::new(),
        };
        let metadata = match &self.metadata_key {
            None => {
                payload.remove(TERMS_KEY);
                Metadata::from_map(payload)
            }
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

/// What a collection's payload indexes let the store answer besides its
/// rankings (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Indexed {
    /// [`TERMS_KEY`] is keyword-indexed: term statistics.
    pub terms: bool,
    /// The `path` field is keyword-indexed: the files a query names.
    pub paths: bool,
}

/// Most distinct paths one facet request lists for [`LexicalStore::named_files`].
pub const MAX_FACET_PATHS: u64 = 1_000_000;
/// Points per page of the scroll over the named files' chunks.
const NAMED_PAGE: u32 = 256;

/// A Qdrant collection as a [`VectorStore`].
pub struct QdrantStore {
    client: RetryingClient,
    target: Target,
    /// Read from the collection's info once, at the first need.
    indexed: tokio::sync::OnceCell<Indexed>,
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
        QdrantStore { client: RetryingClient::new(client, policy), target, indexed: tokio::sync::OnceCell::new() }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The collection's info, as the server reports it.
    async fn info(&self) -> Result<Option<qdrant_client::qdrant::CollectionInfo>, BackendError> {
        let collection_name = self.target.collection.clone();
        let info = self
            .client
            .run(INFO_OPERATION, |client| {
                let request = GetCollectionInfoRequest { collection_name: collection_name.clone() };
                async move { client.collection_info(request).await }
            })
            .await?;
        Ok(info.result)
    }

    /// Which payload indexes the collection has (read once; a failure is
    /// not remembered, so a later call asks again).
    pub async fn indexed(&self) -> Result<Indexed, BackendError> {
        self.indexed
            .get_or_try_init(|| async {
                let schema = self.info().await?.map(|i| i.payload_schema).unwrap_or_default();
                let keyword = |key: &str| {
                    schema
                        .get(key)
                        .is_some_and(|s| s.data_type == qdrant_client::qdrant::PayloadSchemaType::Keyword as i32)
                };
                Ok(Indexed { terms: keyword(TERMS_KEY), paths: keyword(&self.target.layout.field_key("path")) })
            })
            .await
            .copied()
    }

    /// How many points pass `filter` (all when `None`), counted exactly.
    async fn count(&self, filter: Option<Filter>) -> Result<u64, BackendError> {
        let request = CountPoints {
            collection_name: self.target.collection.clone(),
            filter,
            exact: Some(true),
            ..Default::default()
        };
        let counted = self
            .client
            .run(COUNT_OPERATION, |client| {
                let request = request.clone();
                async move { client.count(request).await }
            })
            .await?;
        Ok(counted.result.map_or(0, |r| r.count))
    }

    /// The distinct paths of the points passing `filter`'s server-side conditions.
    async fn paths(&self, filter: &SearchFilter) -> Result<Vec<String>, BackendError> {
        let request = FacetCounts {
            collection_name: self.target.collection.clone(),
            key: self.target.layout.field_key("path"),
            filter: build_filter(filter, &self.target.layout),
            limit: Some(MAX_FACET_PATHS),
            exact: Some(true),
            ..Default::default()
        };
        let facets = self
            .client
            .run(FACET_OPERATION, |client| {
                let request = request.clone();
                async move { client.facet(request).await }
            })
            .await?;
        Ok(facets
            .hits
            .into_iter()
            .filter_map(|hit| match hit.value?.variant? {
                FacetVariant::StringValue(path) => Some(path),
                _ => None,
            })
            .collect())
    }

    /// Every chunk of `paths` that passes `filter`, each file's in line
    /// order, at most [`CHUNKS_PER_NAMED_FILE`] of each, files in the order given.
    async fn chunks_of(&self, paths: &[String], filter: &SearchFilter) -> Result<Vec<Candidate>, BackendError> {
        let layout = &self.target.layout;
        let mut conditions = build_filter(filter, layout).map(|f| f.must).unwrap_or_default();
        let strings = RepeatedStrings { strings: paths.to_vec() };
        conditions.push(Condition::matches(layout.field_key("path"), MatchValue::Keywords(strings)));
        let mut by_file: Vec<Vec<Candidate>> = vec![Vec::new(); paths.len()];
        let mut offset = None;
        loop {
            let request = ScrollPoints {
                collection_name: self.target.collection.clone(),
                filter: Some(Filter::must(conditions.clone())),
                offset: offset.take(),
                limit: Some(NAMED_PAGE),
                with_payload: Some(layout.payload_selector()),
                with_vectors: Some(false.into()),
                ..Default::default()
            };
            let page = self
                .client
                .run(QUERY_OPERATION, |client| {
                    let request = request.clone();
                    async move { client.scroll(request).await }
                })
                .await?;
            for point in page.result {
                let payload: Map<String, Value> = point.payload.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
                let chunk = layout.chunk(point_id_string(point.id.as_ref()), payload);
                if !filter.matches(&chunk) {
                    continue;
                }
                if let Some(file) = paths.iter().position(|p| *p == chunk.metadata.path) {
                    by_file[file].push(Candidate { chunk, distance: None });
                }
            }
            match page.next_page_offset {
                Some(next) => offset = Some(next),
                None => break,
            }
        }
        let mut out = Vec::new();
        for mut chunks in by_file {
            chunks.sort_by_key(|c| (c.chunk.metadata.start_line, c.chunk.metadata.chunk_index));
            out.extend(chunks.into_iter().take(CHUNKS_PER_NAMED_FILE));
        }
        Ok(out)
    }
}

/// Whether `path` passes the parts of `filter` that no payload condition
/// expresses (a glob with wildcards, the kinds of file), judged on the path
/// alone, as a file is before its chunks are read.
fn path_passes(filter: &SearchFilter, path: &str) -> bool {
    let source = || format!("Source: {}/{}@{}:{path}", filter.organization, filter.repository, filter.branch);
    local_glob(filter).is_none_or(|glob| glob.matches_document(&source()))
        && (filter.kinds.is_empty() || filter.kinds.contains(&PathClass::of(path)))
}

/// The files `score` names most strongly, at most `files`. Ties go in the
/// order of the SHA-256 of the path, the order in which the indexer writes
/// a repository's files, so that a tie is broken as the embedded store
/// breaks it (by the order it first stored the files).
pub fn best_named(paths: Vec<String>, files: usize, score: impl Fn(&str) -> f64) -> Vec<String> {
    use sha2::{Digest, Sha256};
    let mut named: Vec<(f64, [u8; 32], String)> = paths
        .into_iter()
        .map(|p| (score(&p), Sha256::digest(p.as_bytes()).into(), p))
        .filter(|(s, _, _)| *s > 0.0)
        .collect();
    named.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    named.into_iter().take(files).map(|(_, _, p)| p).collect()
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
        let info = self.info().await?;
        let config = info.and_then(|r| r.config).and_then(|c| c.params).and_then(|p| p.vectors_config);
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

    /// Counted by Qdrant over the keyword-indexed term lists (module docs).
    async fn term_statistics(
        &self,
        tokens: &[String],
        _ctx: &CallContext,
    ) -> Result<Option<TermStatistics>, BackendError> {
        if !self.indexed().await?.terms {
            return Ok(None);
        }
        let holding =
            |token: &String| Filter::must([Condition::matches(TERMS_KEY, MatchValue::Keyword(token.clone()))]);
        let (rows, frequencies) = futures::join!(
            self.count(None),
            futures::future::try_join_all(tokens.iter().map(|t| self.count(Some(holding(t)))))
        );
        Ok(Some(TermStatistics { rows: rows?, frequencies: frequencies? }))
    }

    /// The best-named files among the collection's paths (module docs).
    async fn named_files(
        &self,
        query: &rr_core::Query,
        filter: &SearchFilter,
        _ctx: &CallContext,
    ) -> Result<Vec<Candidate>, BackendError> {
        let shape = &query.shape;
        let may_name = shape.symbol.is_some() || !shape.identifiers.is_empty() || shape.keywords.len() >= 2;
        if !may_name || !self.indexed().await?.paths {
            return Ok(Vec::new());
        }
        let paths: Vec<String> = self.paths(filter).await?.into_iter().filter(|p| path_passes(filter, p)).collect();
        let named = best_named(paths, NAMED_FILES, |path| rr_core::code_rank::names_file(shape, path));
        if named.is_empty() {
            return Ok(Vec::new());
        }
        self.chunks_of(&named, filter).await
    }
}

#[cfg(test)]
mod tests;
