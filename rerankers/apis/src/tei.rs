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
//! document order. One failed batch fails the whole call. Errors about an
//! answer's indices or count therefore speak of the batch they came from.

use serde::Serialize;

use crate::endpoint::Connection;
use crate::reranker::ApiReranker;
use crate::reranker::{Api, Scored};

/// TEI's own default `--max-client-batch-size`.
pub const DEFAULT_MAX_BATCH_SIZE: usize = 32;

/// Batches in flight at once: enough to keep a GPU server busy without one
/// search taking over its queue.
pub const DEFAULT_MAX_CONCURRENT_BATCHES: usize = 4;

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

/// A TEI server's rerank endpoint as a [`Reranker`](rr_core::Reranker).
pub type TeiReranker = ApiReranker<Tei>;

/// What every TEI request carries, and how the documents are split.
#[derive(Debug)]
pub struct Tei {
    truncate: bool,
    max_batch_size: usize,
    max_concurrent_batches: usize,
}

#[derive(Serialize)]
pub struct Body<'a> {
    query: &'a str,
    texts: &'a [String],
    raw_scores: bool,
    truncate: bool,
    return_text: bool,
}

impl Api for Tei {
    const PROVIDER: &'static str = "tei";
    const PATH: &'static str = "/rerank";
    type Config = TeiConfig;
    type Body<'a> = Body<'a>;
    /// TEI's items are `{"index","score"}`, the shape of `Scored` itself.
    type Response = Vec<Option<Scored>>;

    fn split(config: TeiConfig) -> (Connection, Self) {
        let tei = Tei {
            truncate: config.truncate,
            // `chunks(0)` panics and a stream buffering 0 futures never ends.
            max_batch_size: config.max_batch_size.max(1),
            max_concurrent_batches: config.max_concurrent_batches.max(1),
        };
        (config.connection, tei)
    }

    fn body<'a>(&'a self, query: &'a str, texts: &'a [String]) -> Body<'a> {
        Body { query, texts, raw_scores: false, truncate: self.truncate, return_text: false }
    }

    fn batches(&self) -> (usize, usize) {
        (self.max_batch_size, self.max_concurrent_batches)
    }
}
