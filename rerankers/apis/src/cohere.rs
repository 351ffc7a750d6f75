//! Cohere's `POST /v2/rerank`.
//!
//! Request `{"model","query","documents","top_n"[,"max_tokens_per_doc"]}`
//! with the key as a bearer token; answer `{"id","results":[{"index",
//! "relevance_score"}],"meta"}` sorted by relevance; errors `{"message"}`.
//! `top_n` is the document count: the API's default is every document, but
//! saying so keeps a compatible proxy with a smaller default from cutting
//! the answer short.

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Reranker};
use rr_http::HttpClient;
use rr_http::gojson::null_as_default;
use serde::{Deserialize, Serialize};

use crate::{Connection, Endpoint, RelevanceItem, RerankError, document_scores, relevance_items};

/// Where Cohere's API is served.
pub const DEFAULT_COHERE_URL: &str = "https://api.cohere.com";

const PROVIDER: &str = "cohere";

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

/// Cohere's rerank endpoint as a [`Reranker`].
pub struct CohereReranker {
    endpoint: Endpoint,
    model: String,
    max_tokens_per_doc: Option<u32>,
}

impl std::fmt::Debug for CohereReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CohereReranker")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("max_tokens_per_doc", &self.max_tokens_per_doc)
            .finish()
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    top_n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens_per_doc: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct Response {
    #[serde(default, deserialize_with = "null_as_default")]
    results: Vec<Option<RelevanceItem>>,
}

impl CohereReranker {
    pub fn new(config: CohereConfig, http: HttpClient) -> Self {
        CohereReranker {
            endpoint: Endpoint::new(PROVIDER, config.connection, "/v2/rerank", http),
            model: config.model,
            max_tokens_per_doc: config.max_tokens_per_doc,
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
        let body = Body {
            model: &self.model,
            query,
            documents,
            top_n: documents.len(),
            max_tokens_per_doc: self.max_tokens_per_doc,
        };
        let response: Response = self.endpoint.post(&body).await?;
        document_scores(PROVIDER, relevance_items(response.results), documents.len())
    }
}

#[async_trait]
impl Reranker for CohereReranker {
    fn name(&self) -> &str {
        PROVIDER
    }

    /// The caller's `Authorization` is not forwarded: Cohere has its own key.
    async fn rerank(&self, query: &str, documents: &[String], _ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        self.scores(query, documents).await.map_err(|e| BackendError::new(PROVIDER, e))
    }
}
