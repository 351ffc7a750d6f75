//! Jina's `POST /v1/rerank`.
//!
//! Request `{"model","query","documents","top_n","return_documents":false}`
//! with the key as a bearer token; answer `{"model","usage":{"total_tokens"},
//! "results":[{"index","relevance_score"}]}` sorted by relevance (with
//! `"document"` in each result unless `return_documents` is false, which
//! saves sending every document back); errors `{"detail"}`.

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Reranker};
use rr_http::HttpClient;
use rr_http::gojson::null_as_default;
use serde::{Deserialize, Serialize};

use crate::{Connection, Endpoint, RelevanceItem, RerankError, document_scores, relevance_items};

/// Where Jina's API is served.
pub const DEFAULT_JINA_URL: &str = "https://api.jina.ai";

const PROVIDER: &str = "jina";

/// The model of a Jina reranker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JinaConfig {
    pub connection: Connection,
    /// e.g. `jina-reranker-v2-base-multilingual`.
    pub model: String,
}

/// Jina's rerank endpoint as a [`Reranker`].
pub struct JinaReranker {
    endpoint: Endpoint,
    model: String,
}

impl std::fmt::Debug for JinaReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JinaReranker").field("endpoint", &self.endpoint).field("model", &self.model).finish()
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    top_n: usize,
    return_documents: bool,
}

#[derive(Debug, Default, Deserialize)]
struct Response {
    #[serde(default, deserialize_with = "null_as_default")]
    results: Vec<Option<RelevanceItem>>,
}

impl JinaReranker {
    pub fn new(config: JinaConfig, http: HttpClient) -> Self {
        JinaReranker { endpoint: Endpoint::new(PROVIDER, config.connection, "/v1/rerank", http), model: config.model }
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
        let body = Body { model: &self.model, query, documents, top_n: documents.len(), return_documents: false };
        let response: Response = self.endpoint.post(&body).await?;
        document_scores(PROVIDER, relevance_items(response.results), documents.len())
    }
}

#[async_trait]
impl Reranker for JinaReranker {
    fn name(&self) -> &str {
        PROVIDER
    }

    /// The caller's `Authorization` is not forwarded: Jina has its own key.
    async fn rerank(&self, query: &str, documents: &[String], _ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        self.scores(query, documents).await.map_err(|e| BackendError::new(PROVIDER, e))
    }
}
