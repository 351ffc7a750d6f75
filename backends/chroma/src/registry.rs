//! The `chroma` store kind of the plugin registry.
//!
//! Settings (`deny_unknown_fields`): `url`, `tenant` (default
//! `default_tenant`), `database` (default `default_database`), `collection`,
//! and `token_env`, the name of the environment variable holding the bearer
//! token: secrets never sit in the configuration file.

use std::sync::Arc;

use async_trait::async_trait;
use rr_core::registry::{FactoryContext, FactoryError};
use rr_core::{BackendError, CallContext, Candidate, VectorQuery, VectorStore};
use rr_http::HttpClient;
use serde::Deserialize;
use serde_json::Value;

use crate::store::{ChromaConfig, ChromaStore, LOOKUP_OPERATION, STORE_NAME};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    url: String,
    #[serde(default = "default_tenant")]
    tenant: String,
    #[serde(default = "default_database")]
    database: String,
    collection: String,
    #[serde(default)]
    token_env: Option<String>,
}

fn default_tenant() -> String {
    "default_tenant".into()
}
fn default_database() -> String {
    "default_database".into()
}

/// A Chroma store that also reports its collection's dimension.
struct RegisteredChroma {
    inner: ChromaStore,
    http: HttpClient,
}

#[derive(Debug, Default, Deserialize)]
struct CollectionDimension {
    #[serde(default)]
    dimension: Option<Value>,
}

#[async_trait]
impl VectorStore for RegisteredChroma {
    fn name(&self) -> &str {
        STORE_NAME
    }

    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        self.inner.query(query, ctx).await
    }

    /// Chroma reports `dimension` on the collection once it holds a vector.
    async fn dimension(&self, ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        let auth = self.inner.authorization.as_deref().or(ctx.authorization.as_deref()).filter(|a| !a.is_empty());
        let c: CollectionDimension = self
            .http
            .get_json(LOOKUP_OPERATION, self.inner.collection_url(), auth)
            .await
            .map_err(|e| BackendError::new(STORE_NAME, e))?;
        Ok(c.dimension.and_then(|d| d.as_u64()).map(|d| d as usize))
    }
}

fn create(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    let token = ctx.optional_secret("token_env", s.token_env.as_deref())?;
    let http = rr_http::client_for(ctx)?.with_secret(token.as_deref().unwrap_or_default());
    let inner = ChromaStore::new(
        ChromaConfig {
            server_url: s.url,
            tenant: s.tenant,
            database: s.database,
            collection_name: s.collection,
            bearer_token: token,
        },
        http.clone(),
    );
    Ok(Arc::new(RegisteredChroma { inner, http }))
}

rr_core::register_plugin!(store "chroma", create);
