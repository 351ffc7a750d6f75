//! Jina's `POST /v1/rerank`.
//!
//! Request `{"model","query","documents","top_n","return_documents":false}`
//! with the key as a bearer token; answer `{"model","usage":{"total_tokens"},
//! "results":[{"index","relevance_score"}]}` sorted by relevance (with
//! `"document"` in each result unless `return_documents` is false, which
//! saves sending every document back); errors `{"detail"}`.

use serde::Serialize;

use crate::endpoint::Connection;
use crate::reranker::ApiReranker;
use crate::reranker::{Api, Results};

/// Where Jina's API is served.
pub const DEFAULT_JINA_URL: &str = "https://api.jina.ai";

/// The model of a Jina reranker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JinaConfig {
    pub connection: Connection,
    /// e.g. `jina-reranker-v2-base-multilingual`.
    pub model: String,
}

/// Jina's rerank endpoint as a [`Reranker`](rr_core::Reranker).
pub type JinaReranker = ApiReranker<Jina>;

/// What every Jina request carries besides the query and the documents.
#[derive(Debug)]
pub struct Jina {
    model: String,
}

#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    top_n: usize,
    return_documents: bool,
}

impl Api for Jina {
    const PROVIDER: &'static str = "jina";
    const PATH: &'static str = "/v1/rerank";
    type Config = JinaConfig;
    type Body<'a> = Body<'a>;
    type Response = Results;

    fn split(config: JinaConfig) -> (Connection, Self) {
        (config.connection, Jina { model: config.model })
    }

    fn body<'a>(&'a self, query: &'a str, documents: &'a [String]) -> Body<'a> {
        Body { model: &self.model, query, documents, top_n: documents.len(), return_documents: false }
    }
}
