//! The `chroma` store kind of the plugin registry.
//!
//! Settings (`deny_unknown_fields`): `url`, `tenant` (default
//! `default_tenant`), `database` (default `default_database`), `collection`,
//! and `token_env`, the name of the environment variable holding the bearer
//! token: secrets never sit in the configuration file.

use std::sync::Arc;

use rr_core::VectorStore;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::store::{ChromaConfig, ChromaStore};

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
        http,
    );
    Ok(Arc::new(inner))
}

rr_core::register_plugin!(store "chroma", create);
