//! The `openai` reranker kind of the plugin registry.
//!
//! Settings (`deny_unknown_fields`): `api_url`, `model` and `api_key_env`
//! (the environment variable holding the key; keys never sit in the file).

use std::sync::Arc;

use rr_core::Reranker;
use rr_core::registry::{FactoryContext, FactoryError};
use rr_http::{HttpClient, HttpSettings};
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
    let mut settings = HttpSettings::new(ctx.user_agent.clone());
    settings.retry_attempts = ctx.retry_attempts;
    settings.request_timeout = ctx.request_timeout;
    settings.secrets = ctx.secrets.clone();
    let http = HttpClient::new(settings).map_err(|e| FactoryError::new(e.to_string()))?;
    Ok(Arc::new(OpenAiReranker::new(OpenAiRerankerConfig { api_url: s.api_url, model: s.model, api_key }, http)))
}

rr_core::register_plugin!(reranker "openai", create);
