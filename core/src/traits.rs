//! The three I/O seams of the pipeline.
//!
//! All three are object-safe through `async-trait` so that a registry and the
//! server can hold them as `Arc<dyn …>`. Each has a `name()` that logs and
//! errors use to say which backend spoke.

use async_trait::async_trait;

use crate::error::BackendError;
use crate::filter::SearchFilter;
use crate::query::Query;
use crate::record::Candidate;

/// Per-call context passed to every backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    /// The `Authorization` header of the incoming HTTP request, verbatim,
    /// when the transport has one. A store may forward it to its server when
    /// it has no credential of its own.
    pub authorization: Option<String>,
}

/// Turns text into vectors.
///
/// Implementors must return exactly one non-empty vector per input, in input
/// order, or an error; callers rely on it and do not check again. Inputs
/// arrive with any model prefix (`query: `, `passage: `) already applied.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Short name for logs and errors.
    fn name(&self) -> &str;

    /// Embeds `inputs` in one request where the backend allows it.
    async fn embed(&self, inputs: &[String], ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError>;

    /// The length of every vector, when known without asking the model.
    /// Callers that need the truth use the length of an actual embedding.
    fn dimension(&self) -> Option<usize> {
        None
    }

    /// The weight of this embedder's ranking in hybrid fusion when the
    /// operator sets none (see [`HybridOptions::for_embedder`]). An embedder
    /// whose nearest neighbours are a weak signal next to the lexical
    /// ranking says so with a lower weight.
    fn hybrid_weight_dense(&self) -> f64 {
        HybridOptions::default().weight_dense
    }
}

/// One nearest-neighbour query.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorQuery {
    pub embedding: Vec<f32>,
    /// How many candidates to return at most.
    pub n_results: usize,
    pub filter: SearchFilter,
}

/// A searchable collection of chunks.
///
/// Implementors must apply `filter` *before* ranking (a narrow filter still
/// yields up to `n_results` candidates when that many match), and must return
/// candidates in relevance order, closest first. The caller guarantees a
/// non-empty embedding and `n_results >= 1`.
#[async_trait]
pub trait VectorStore: Send + Sync {
    /// Short name for logs and errors.
    fn name(&self) -> &str;

    /// The `n_results` closest chunks that pass the filter.
    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError>;

    /// The dimension of the stored vectors, when the store knows it (an
    /// empty store may not). Multi-store search checks it against the
    /// embedder's once, before the first query.
    async fn dimension(&self, _ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        Ok(None)
    }

    /// The store's lexical ranking, when it has one: the capability behind
    /// the `lexical` and `hybrid` retrieval modes ([`crate::retrieval`]).
    /// `None` (the default) makes those modes run dense.
    fn lexical(&self) -> Option<&dyn LexicalStore> {
        None
    }

    /// What the `distance` of [`query`](Self::query)'s candidates measures,
    /// when the store knows: a federation of stores that share an embedder
    /// merges their nearest neighbours by closeness when every store says,
    /// by rank otherwise. May be `None` until the store has answered a query.
    fn distance_kind(&self) -> Option<DistanceKind> {
        None
    }
}

/// What a store's dense `distance` measures, for vectors of length 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistanceKind {
    /// `1 − cos`.
    Cosine,
    /// The squared Euclidean distance, `2 − 2·cos`.
    SquaredEuclidean,
    /// `−cos`: a similarity, negated so that lower is closer.
    NegatedCosine,
}

impl DistanceKind {
    /// `distance` as `1 − cos`.
    pub fn cosine_distance(self, distance: f64) -> f64 {
        match self {
            DistanceKind::Cosine => distance,
            DistanceKind::SquaredEuclidean => distance / 2.0,
            DistanceKind::NegatedCosine => 1.0 + distance,
        }
    }
}

/// Scores documents against a query.
///
/// Implementors must return exactly one score per document, in document
/// order (higher is more relevant), or an error: a partial answer would
/// silently reorder results.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// Short name for logs and errors.
    fn name(&self) -> &str;

    /// One relevance score per document.
    async fn rerank(&self, query: &str, documents: &[String], ctx: &CallContext) -> Result<Vec<f64>, BackendError>;

    /// [`rerank`](Self::rerank), also reporting the time each of its stages
    /// took, by name, in order: one stage, this reranker, unless it is a
    /// chain ([`RerankChain`](crate::RerankChain)).
    async fn rerank_timed(
        &self,
        query: &str,
        documents: &[String],
        ctx: &CallContext,
    ) -> Result<(Vec<f64>, Vec<(String, std::time::Duration)>), BackendError> {
        let started = std::time::Instant::now();
        let scores = self.rerank(query, documents, ctx).await?;
        Ok((scores, vec![(self.name().to_owned(), started.elapsed())]))
    }

    /// The lowest score a candidate may have and still be selected; the
    /// pipeline drops candidates scoring below it (or NaN) before selection.
    /// A provided method so that every existing reranker keeps its meaning
    /// (no cut-off); a [`RerankChain`](crate::RerankChain) carries one.
    fn min_score(&self) -> Option<f64> {
        None
    }
}

/// A chunk with its document embedding, as written to a store.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedChunk {
    pub chunk: crate::record::Chunk,
    pub embedding: Vec<f32>,
}

/// A store the indexer can write to.
///
/// Synchronisation relies on these guarantees: `upsert` is all-or-nothing
/// per call (a failed call leaves no partial batch visible), ids are stable
/// keys (writing an existing id replaces that record), `namespace_ids`
/// returns every id whose `namespace_id` metadata equals the argument and no
/// other, and `delete` ignores ids that are already gone. The caller
/// guarantees batches no larger than [`IndexStore::max_batch_size`].
#[async_trait]
pub trait IndexStore: Send + Sync {
    /// Short name for logs and errors.
    fn name(&self) -> &str;

    /// The largest number of records one `upsert` or `delete` may carry.
    fn max_batch_size(&self) -> usize;

    /// Every record id in one namespace (organization/repository/branch).
    async fn namespace_ids(&self, namespace_id: &str) -> Result<Vec<String>, BackendError>;

    /// Inserts or replaces records.
    async fn upsert(&self, records: &[EmbeddedChunk]) -> Result<(), BackendError>;

    /// Removes records by id.
    async fn delete(&self, ids: &[String]) -> Result<(), BackendError>;
}

/// The weights of hybrid fusion (defaults and checks in [`crate::retrieval`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridOptions {
    /// Weight of the dense ranking.
    pub weight_dense: f64,
    /// Weight of the lexical ranking.
    pub weight_lexical: f64,
    /// The `k` of reciprocal-rank fusion: larger flattens the first ranks' lead.
    pub rrf_k: f64,
    /// Candidates read from each ranking before fusion (at least the
    /// number asked for).
    pub depth: usize,
    /// The first fused candidates (after the verbatim matches) ordered again
    /// by how much of the query each holds (0: none), when the lexical
    /// ranking has term statistics ([`LexicalStore::term_statistics`]).
    pub rerank: usize,
}

/// What [`LexicalStore::hybrid_inputs`] answers.
#[derive(Debug, Clone, PartialEq)]
pub struct HybridInputs {
    pub dense: Vec<Candidate>,
    pub lexical: Vec<Candidate>,
    pub statistics: Option<TermStatistics>,
}

/// Document frequencies of index tokens ([`LexicalStore::term_statistics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermStatistics {
    /// The chunks in the index.
    pub rows: u64,
    /// For each token asked for, in order, the chunks that hold it.
    pub frequencies: Vec<u64>,
}

/// One lexical query.
#[derive(Debug, Clone, PartialEq)]
pub struct LexicalQuery {
    /// The user's query, without any model prefix.
    pub text: String,
    pub n_results: usize,
    pub filter: SearchFilter,
}

/// A store that can rank chunks by the query's words.
///
/// Implementors must apply the filter before ranking and return candidates
/// best first, as [`VectorStore::query`] does. The caller guarantees
/// `n_results >= 1`.
#[async_trait]
pub trait LexicalStore: Send + Sync {
    /// The `n_results` chunks passing the filter that best match the words.
    async fn lexical_query(&self, query: &LexicalQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError>;

    /// The inputs of a hybrid ranking in one call, for a store that answers
    /// them together more cheaply (one snapshot, each chunk read once): its
    /// own nearest neighbours of `embedding` and the lexical ranking, each to
    /// `query.n_results`, and the statistics of `tokens` when given. `None`
    /// (the default): the engine asks for each. Either way the engine fuses
    /// them; an answer must equal the three separate ones. The engine asks
    /// only a store's own lexical ranking ([`VectorStore::lexical`]), never
    /// an index kept beside another store.
    async fn hybrid_inputs(
        &self,
        _query: &LexicalQuery,
        _embedding: &[f32],
        _tokens: Option<&[String]>,
        _ctx: &CallContext,
    ) -> Option<Result<HybridInputs, BackendError>> {
        None
    }

    /// How many chunks hold each of `tokens` (as the lexical ranking
    /// indexes words: stems and identifier parts, lower-cased), and how many
    /// chunks there are: the statistics the engine weighs the query's terms
    /// with when it reads the head of a hybrid ranking again
    /// ([`crate::evidence`]). `None` (the default): no statistics, and the
    /// head keeps the fused order.
    async fn term_statistics(
        &self,
        _tokens: &[String],
        _ctx: &CallContext,
    ) -> Result<Option<TermStatistics>, BackendError> {
        Ok(None)
    }

    /// The chunks of the files the query names by their file names
    /// ([`crate::code_rank::names_file`]), at most
    /// [`NAMED_FILES`](crate::code_rank::NAMED_FILES) files, the most
    /// strongly named first, each file's chunks in file order: candidates
    /// the code ranking reads beside the store's ranking, since a text
    /// ranking misses `JsonObject.java` when every chunk says "json". A
    /// store that cannot list its files answers none.
    async fn named_files(
        &self,
        _query: &Query,
        _filter: &SearchFilter,
        _ctx: &CallContext,
    ) -> Result<Vec<Candidate>, BackendError> {
        Ok(Vec::new())
    }
}
