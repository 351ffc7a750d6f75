//! Voyage AI's `POST /v1/rerank`.
//!
//! Request `{"query","documents","model","top_k","return_documents":false,
//! "truncation"}` with the key as a bearer token; answer `{"object":"list",
//! "data":[{"relevance_score","index"}],"model","usage":{"total_tokens"}}`
//! sorted by relevance (note `data`, not `results`); errors `{"detail"}`.
//! With `truncation` false the API refuses a query or document over the
//! model's context instead of cutting it.

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Reranker};
use rr_http::HttpClient;
use rr_http::gojson::null_as_default;
use serde::{Deserialize, Serialize};

use crate::{Connection, Endpoint, RelevanceItem, RerankError, document_scores, relevance_items};

/// Where Voyage's API is served.
pub const DEFAULT_VOYAGE_URL: &str = "https://api.voyageai.com";

const PROVIDER: &str = "voyage";

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

/// Voyage's rerank endpoint as a [`Reranker`].
pub struct VoyageReranker {
    endpoint: Endpoint,
    model: String,
    truncation: bool,
}

impl std::fmt::Debug for VoyageReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VoyageReranker")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("truncation", &self.truncation)
            .finish()
    }
}

#[derive(Serialize)]
struct Body<'a> {
    query: &'a str,
    documents: &'a [String],
    model: &'a str,
    top_k: usize,
    return_documents: bool,
    truncation: bool,
}

#[derive(Debug, Default, Deserialize)]
struct Response {
    #[serde(default, deserialize_with = "null_as_default")]
    data: Vec<Option<RelevanceItem>>,
}

impl VoyageReranker {
    pub fn new(config: VoyageConfig, http: HttpClient) -> Self {
        VoyageReranker {
            endpoint: Endpoint::new(PROVIDER, config.connection, "/v1/rerank", http),
            model: config.model,
            truncation: config.truncation,
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
            query,
            documents,
            model: &self.model,
            top_k: documents.len(),
            return_documents: false,
            truncation: self.truncation,
        };
        let response: Response = self.endpoint.post(&body).await?;
        document_scores(PROVIDER, relevance_items(response.data), documents.len())
    }
}

#[async_trait]
impl Reranker for VoyageReranker {
    fn name(&self) -> &str {
        PROVIDER
    }

    /// The caller's `Authorization` is not forwarded: Voyage has its own key.
    async fn rerank(&self, query: &str, documents: &[String], _ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        self.scores(query, documents).await.map_err(|e| BackendError::new(PROVIDER, e))
    }
}
