//! Registration as store kind `qdrant`.
//!
//! Settings (`deny_unknown_fields`): `url` (the gRPC endpoint, e.g.
//! `http://localhost:6334`), `collection`, `api_key_env` (the name of the
//! environment variable holding the API key: secrets never sit in the
//! configuration file), `document_key` (default `document`), `metadata_key`
//! (absent: metadata fields are top-level payload keys), `vector_name`
//! (absent: the collection's unnamed vector) and `sparse_vector_name` (the
//! sparse BM25 vector the indexer writes, `bm25` in its collections; absent:
//! the store ranks densely only). Transient failures are retried
//! `retry_attempts` times in all (the stores file's setting).

use std::sync::Arc;

use qdrant_client::Qdrant;
use rr_core::VectorStore;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::{DEFAULT_DOCUMENT_KEY, PayloadLayout, QdrantStore, RetryPolicy, Target};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    pub(crate) url: String,
    pub(crate) collection: String,
    #[serde(default)]
    pub(crate) api_key_env: Option<String>,
    #[serde(default = "default_document_key")]
    pub(crate) document_key: String,
    #[serde(default)]
    pub(crate) metadata_key: Option<String>,
    #[serde(default)]
    pub(crate) vector_name: Option<String>,
    #[serde(default)]
    pub(crate) sparse_vector_name: Option<String>,
}

fn default_document_key() -> String {
    DEFAULT_DOCUMENT_KEY.into()
}

impl Settings {
    pub(crate) fn target(&self) -> Target {
        Target {
            collection: self.collection.clone(),
            vector_name: self.vector_name.clone(),
            sparse_vector_name: self.sparse_vector_name.clone(),
            layout: PayloadLayout { document_key: self.document_key.clone(), metadata_key: self.metadata_key.clone() },
        }
    }
}

pub(crate) fn create(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    let api_key = ctx.optional_secret("api_key_env", s.api_key_env.as_deref())?;
    // No compatibility check: it would connect from a sync context and print to
    // stdout, which belongs to the MCP protocol in stdio mode.
    let client = Qdrant::from_url(&s.url)
        .api_key(api_key)
        .timeout(ctx.request_timeout)
        .skip_compatibility_check()
        .build()
        .map_err(|e| FactoryError::new(format!("url: {e}")))?;
    let policy = RetryPolicy { attempts: ctx.retry_attempts, ..RetryPolicy::default() };
    Ok(Arc::new(QdrantStore::with_retry(client, s.target(), policy)))
}

rr_core::register_plugin!(store "qdrant", create);
