//! The `openai` reranker kind of the plugin registry.
//!
//! Settings (`deny_unknown_fields`): `api_url`, `model` and `api_key_env`
//! (the environment variable holding the key; keys never sit in the file).

use std::sync::Arc;

use rr_core::Reranker;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::{OpenAiReranker, OpenAiRerankerConfig};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    api_url: String,
    model: String,
    #[serde(default)]
    api_key_env: Option<String>,
}

fn create(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    let api_key = ctx.optional_secret("api_key_env", s.api_key_env.as_deref())?;
    let http = rr_http::client_for(ctx)?;
    Ok(Arc::new(OpenAiReranker::new(OpenAiRerankerConfig { api_url: s.api_url, model: s.model, api_key }, http)))
}

rr_core::register_plugin!(reranker "openai", create);
