//! Cohere's `POST /v2/rerank`.
//!
//! Request `{"model","query","documents","top_n"[,"max_tokens_per_doc"]}`
//! with the key as a bearer token; answer `{"id","results":[{"index",
//! "relevance_score"}],"meta"}` sorted by relevance; errors `{"message"}`.
//! `top_n` is the document count: the API's default is every document, but
//! saying so keeps a compatible proxy with a smaller default from cutting
//! the answer short.

use serde::Serialize;

use crate::endpoint::Connection;
use crate::reranker::ApiReranker;
use crate::reranker::{Api, Results};

/// Where Cohere's API is served.
pub const DEFAULT_COHERE_URL: &str = "https://api.cohere.com";

/// The model and options of a Cohere reranker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CohereConfig {
    pub connection: Connection,
    /// e.g. `rerank-v3.5`.
    pub model: String,
    /// Longer documents are truncated by the API to this many tokens
    /// (its default is 4096).
    pub max_tokens_per_doc: Option<u32>,
}

/// Cohere's rerank endpoint as a [`Reranker`](rr_core::Reranker).
pub type CohereReranker = ApiReranker<Cohere>;

/// What every Cohere request carries besides the query and the documents.
#[derive(Debug)]
pub struct Cohere {
    model: String,
    max_tokens_per_doc: Option<u32>,
}

#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    top_n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens_per_doc: Option<u32>,
}

impl Api for Cohere {
    const PROVIDER: &'static str = "cohere";
    const PATH: &'static str = "/v2/rerank";
    type Config = CohereConfig;
    type Body<'a> = Body<'a>;
    type Response = Results;

    fn split(config: CohereConfig) -> (Connection, Self) {
        (config.connection, Cohere { model: config.model, max_tokens_per_doc: config.max_tokens_per_doc })
    }

    fn body<'a>(&'a self, query: &'a str, documents: &'a [String]) -> Body<'a> {
        Body {
            model: &self.model,
            query,
            documents,
            top_n: documents.len(),
            max_tokens_per_doc: self.max_tokens_per_doc,
        }
    }
}
