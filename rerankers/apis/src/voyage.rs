//! Voyage AI's `POST /v1/rerank`.
//!
//! Request `{"query","documents","model","top_k","return_documents":false,
//! "truncation"}` with the key as a bearer token; answer `{"object":"list",
//! "data":[{"relevance_score","index"}],"model","usage":{"total_tokens"}}`
//! sorted by relevance (note `data`, not `results`); errors `{"detail"}`.
//! With `truncation` false the API refuses a query or document over the
//! model's context instead of cutting it.

use rr_http::json::null_as_default;
use serde::{Deserialize, Serialize};

use crate::endpoint::Connection;
use crate::reranker::ApiReranker;
use crate::reranker::{Api, RelevanceItem, Scored, relevance_items};

/// Where Voyage's API is served.
pub const DEFAULT_VOYAGE_URL: &str = "https://api.voyageai.com";

/// The model and options of a Voyage reranker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoyageConfig {
    pub connection: Connection,
    /// e.g. `rerank-2.5`.
    pub model: String,
    /// Let the API truncate inputs over the model's context (the API's
    /// default) rather than refuse them.
    pub truncation: bool,
}

/// Voyage's rerank endpoint as a [`Reranker`](rr_core::Reranker).
pub type VoyageReranker = ApiReranker<Voyage>;

/// What every Voyage request carries besides the query and the documents.
#[derive(Debug)]
pub struct Voyage {
    model: String,
    truncation: bool,
}

#[derive(Serialize)]
pub struct Body<'a> {
    query: &'a str,
    documents: &'a [String],
    model: &'a str,
    top_k: usize,
    return_documents: bool,
    truncation: bool,
}

#[derive(Debug, Default, Deserialize)]
pub struct Response {
    #[serde(default, deserialize_with = "null_as_default")]
    data: Vec<Option<RelevanceItem>>,
}

impl From<Response> for Vec<Option<Scored>> {
    fn from(response: Response) -> Self {
        relevance_items(response.data)
    }
}

impl Api for Voyage {
    const PROVIDER: &'static str = "voyage";
    const PATH: &'static str = "/v1/rerank";
    type Config = VoyageConfig;
    type Body<'a> = Body<'a>;
    type Response = Response;

    fn split(config: VoyageConfig) -> (Connection, Self) {
        (config.connection, Voyage { model: config.model, truncation: config.truncation })
    }

    fn body<'a>(&'a self, query: &'a str, documents: &'a [String]) -> Body<'a> {
        Body {
            query,
            documents,
            model: &self.model,
            top_k: documents.len(),
            return_documents: false,
            truncation: self.truncation,
        }
    }
}
