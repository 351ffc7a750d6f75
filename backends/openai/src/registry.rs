//! The `openai` embedder kind of the plugin registry.
//!
//! Settings (`deny_unknown_fields`): `api_url`, `model`, `api_key_env` (the
//! environment variable holding the key; keys never sit in the file) and
//! `dimension`, the length of the model's vectors when the operator wants it
//! known before the first call.

use std::sync::Arc;

use async_trait::async_trait;
use rr_core::registry::{FactoryContext, FactoryError};
use rr_core::{BackendError, CallContext, Embedder};
use serde::Deserialize;
use serde_json::Value;

use crate::{OpenAiEmbedder, OpenAiEmbedderConfig};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    api_url: String,
    model: String,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    dimension: Option<usize>,
}

struct Registered {
    inner: OpenAiEmbedder,
    dimension: Option<usize>,
}

#[async_trait]
impl Embedder for Registered {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn embed(&self, inputs: &[String], ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        self.inner.embed(inputs, ctx).await
    }
    fn dimension(&self) -> Option<usize> {
        self.dimension
    }
}

fn create(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn Embedder>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    let api_key = ctx.optional_secret("api_key_env", s.api_key_env.as_deref())?;
    let http = rr_http::client_for(ctx)?;
    let inner = OpenAiEmbedder::new(OpenAiEmbedderConfig { api_url: s.api_url, model: s.model, api_key }, http);
    Ok(Arc::new(Registered { inner, dimension: s.dimension }))
}

rr_core::register_plugin!(embedder "openai", create);
