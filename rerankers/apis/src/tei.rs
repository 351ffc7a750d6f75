//! Hugging Face text-embeddings-inference (TEI): `POST /rerank`.
//!
//! Request `{"query","texts","raw_scores":false,"truncate","return_text":
//! false}`, with a bearer token only when the server was started with
//! `--api-key`; answer a bare array `[{"index","score"}]` sorted by score;
//! errors `{"error","error_type"}`.
//!
//! TEI refuses a request with more texts than its `--max-client-batch-size`
//! (32 unless raised) outright, so the documents go in batches of
//! `max_batch_size`, at most `max_concurrent_batches` in flight, each
//! batch's indices relative to the batch; the scores are joined back in
//! document order. One failed batch fails the whole call: a reranking with a
//! hole in it would reorder results silently. Errors about an answer's
//! indices or count therefore speak of the batch they came from.

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt, stream};
use rr_core::{BackendError, CallContext, Reranker};
use rr_http::HttpClient;
use serde::{Deserialize, Serialize};

use crate::{Connection, Endpoint, RerankError, Scored, document_scores};

/// TEI's own default `--max-client-batch-size`.
pub const DEFAULT_MAX_BATCH_SIZE: usize = 32;

/// Batches in flight at once: enough to keep a GPU server busy without one
/// search taking over its queue.
pub const DEFAULT_MAX_CONCURRENT_BATCHES: usize = 4;

const PROVIDER: &str = "tei";

/// Where the TEI server is and how to split the documents for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeiConfig {
    /// There is no default origin: TEI is self-hosted.
    pub connection: Connection,
    /// Let the server truncate inputs over the model's length (TEI's own
    /// default is to refuse them).
    pub truncate: bool,
    /// Texts per request, at most the server's `--max-client-batch-size`;
    /// 0 counts as 1.
    pub max_batch_size: usize,
    /// Requests in flight at once; 0 counts as 1.
    pub max_concurrent_batches: usize,
}

impl TeiConfig {
    /// A server at `connection` with the defaults: truncation on, batches
    /// of [`DEFAULT_MAX_BATCH_SIZE`], [`DEFAULT_MAX_CONCURRENT_BATCHES`] at once.
    pub fn new(connection: Connection) -> Self {
        TeiConfig {
            connection,
            truncate: true,
            max_batch_size: DEFAULT_MAX_BATCH_SIZE,
            max_concurrent_batches: DEFAULT_MAX_CONCURRENT_BATCHES,
        }
    }
}

/// A TEI server's rerank endpoint as a [`Reranker`].
pub struct TeiReranker {
    endpoint: Endpoint,
    truncate: bool,
    max_batch_size: usize,
    max_concurrent_batches: usize,
}

impl std::fmt::Debug for TeiReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeiReranker")
            .field("endpoint", &self.endpoint)
            .field("truncate", &self.truncate)
            .field("max_batch_size", &self.max_batch_size)
            .field("max_concurrent_batches", &self.max_concurrent_batches)
            .finish()
    }
}

#[derive(Serialize)]
struct Body<'a> {
    query: &'a str,
    texts: &'a [String],
    raw_scores: bool,
    truncate: bool,
    return_text: bool,
}

#[derive(Debug, Deserialize)]
struct Rank {
    #[serde(default)]
    index: Option<i64>,
    #[serde(default)]
    score: Option<f64>,
}

impl TeiReranker {
    pub fn new(config: TeiConfig, http: HttpClient) -> Self {
        TeiReranker {
            endpoint: Endpoint::new(PROVIDER, config.connection, "/rerank", http),
            truncate: config.truncate,
            // `chunks(0)` panics and a stream buffering 0 futures never ends.
            max_batch_size: config.max_batch_size.max(1),
            max_concurrent_batches: config.max_concurrent_batches.max(1),
        }
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        self.endpoint.url()
    }

    /// One score per document, in document order; no request for none.
    pub async fn scores(&self, query: &str, documents: &[String]) -> Result<Vec<f64>, RerankError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        // Built before streaming: a closure inside the stream would make the
        // future not `Send` for every lifetime, as `async_trait` needs.
        let requests: Vec<_> = documents.chunks(self.max_batch_size).map(|texts| self.batch(query, texts)).collect();
        // `buffered` keeps the batches' order whatever order they finish in.
        let batches: Vec<Vec<f64>> = stream::iter(requests).buffered(self.max_concurrent_batches).try_collect().await?;
        Ok(batches.concat())
    }

    async fn batch(&self, query: &str, texts: &[String]) -> Result<Vec<f64>, RerankError> {
        let body = Body { query, texts, raw_scores: false, truncate: self.truncate, return_text: false };
        let ranks: Vec<Option<Rank>> = self.endpoint.post(&body).await?;
        let results = ranks.into_iter().map(|rank| rank.map(|r| Scored { index: r.index, score: r.score })).collect();
        document_scores(PROVIDER, results, texts.len())
    }
}

#[async_trait]
impl Reranker for TeiReranker {
    fn name(&self) -> &str {
        PROVIDER
    }

    /// The caller's `Authorization` is not forwarded: the TEI server has its
    /// own key, if any.
    async fn rerank(&self, query: &str, documents: &[String], _ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        self.scores(query, documents).await.map_err(|e| BackendError::new(PROVIDER, e))
    }
}
