//! Builds the search engine a drop-in configuration describes.
//!
//! The Chroma store, the OpenAI-compatible embedder and reranker are created
//! by kind through the plugin registry, like every other backend; the
//! configuration's secrets reach the factories through the context's
//! environment lookup, under the variables the drop-in reads them from.

use std::sync::Arc;

use rr_chroma::{ChromaConfig, ChromaStore};
use rr_core::registry::{FactoryContext, Registry};
use rr_core::{PipelineOptions, RerankOptions, SearchEngine};
use rr_http::{HttpClient, HttpError, HttpSettings};
use serde_json::{Value, json};

use crate::config::Config;

pub use rr_engine::{NAME, user_agent};

/// `<os>/<arch>` in the spelling operators know from Go tools.
pub fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

/// The one-line `--version` answer, also reported as `serverInfo.version`.
pub fn version_line() -> String {
    format!("{NAME} version v{} ({})", env!("CARGO_PKG_VERSION"), platform())
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// The HTTP client of every backend request: the configured attempts,
/// timeout and secrets to redact.
pub fn http_client(config: &Config) -> Result<HttpClient, HttpError> {
    let mut settings = HttpSettings::new(user_agent());
    settings.retry_attempts = config.retry_attempts as u32;
    settings.request_timeout = config.request_timeout;
    settings.secrets = config.secrets();
    HttpClient::new(settings)
}

/// The configured Chroma collection as the navigation tools read it (whole
/// collection pages, not queries).
pub fn chroma_store(config: &Config, http: HttpClient) -> ChromaStore {
    ChromaStore::new(
        ChromaConfig {
            server_url: config.server_url.clone(),
            tenant: config.tenant.clone(),
            database: config.database.clone(),
            collection_name: config.collection_name.clone(),
            bearer_token: non_empty(&config.bearer_token),
        },
        http,
    )
}

const BEARER_TOKEN_VAR: &str = "CHROMA_REPO_SEARCH_BEARER_TOKEN";
const EMBEDDING_API_KEY_VAR: &str = "CHROMA_REPO_SEARCH_EMBEDDING_API_KEY";
const RERANK_API_KEY_VAR: &str = "CHROMA_REPO_SEARCH_RERANK_API_KEY";

/// The factories' context: the configured attempts and timeout, every
/// secret redacted, and the secrets as resolved from flags, environment and
/// YAML (not the process environment alone).
fn context(config: &Config) -> FactoryContext {
    let mut ctx = FactoryContext::new(user_agent());
    ctx.retry_attempts = config.retry_attempts as u32;
    ctx.request_timeout = config.request_timeout;
    ctx.secrets = config.secrets();
    let secrets = [
        (BEARER_TOKEN_VAR, config.bearer_token.clone()),
        (EMBEDDING_API_KEY_VAR, config.embedding_api_key.clone()),
        (RERANK_API_KEY_VAR, config.rerank_api_key.clone()),
    ];
    ctx.env = Arc::new(move |name| secrets.iter().find(|(var, _)| *var == name).map(|(_, v)| v.clone()));
    ctx
}

/// Adds `"<key>": <var>` when the secret is set: factories refuse a named
/// variable that is empty.
fn with_secret(mut settings: Value, key: &str, var: &str, value: &str) -> Value {
    if !value.is_empty() {
        settings[key] = Value::from(var);
    }
    settings
}

/// The Chroma store, the OpenAI-compatible embedder and, when configured,
/// the OpenAI-compatible reranker, each built by the registry's kind.
pub fn build_engine(config: &Config) -> Result<SearchEngine, String> {
    let registry = Registry::builtin().map_err(|e| e.to_string())?;
    build_engine_with(config, &registry)
}

/// [`build_engine`] with `registry`'s kinds.
pub fn build_engine_with(config: &Config, registry: &Registry) -> Result<SearchEngine, String> {
    let ctx = context(config);
    let store = json!({
        "url": config.server_url,
        "tenant": config.tenant,
        "database": config.database,
        "collection": config.collection_name,
    });
    let store = with_secret(store, "token_env", BEARER_TOKEN_VAR, &config.bearer_token);
    let store = registry.store(rr_chroma::STORE_NAME, &store, &ctx).map_err(|e| e.to_string())?;
    let embedder = json!({ "api_url": config.embedding_api_url, "model": config.embedding_model });
    let embedder = with_secret(embedder, "api_key_env", EMBEDDING_API_KEY_VAR, &config.embedding_api_key);
    let embedder = registry.embedder("openai", &embedder, &ctx).map_err(|e| e.to_string())?;
    let reranker = if config.reranking_enabled() {
        let reranker = json!({ "api_url": config.rerank_api_url, "model": config.rerank_model });
        let reranker = with_secret(reranker, "api_key_env", RERANK_API_KEY_VAR, &config.rerank_api_key);
        Some(registry.reranker("openai", &reranker, &ctx).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let options = PipelineOptions {
        rerank: RerankOptions {
            candidate_multiplier: config.rerank_candidate_multiplier as usize,
            max_candidates: config.rerank_max_candidates as usize,
            max_document_bytes: config.rerank_max_document_bytes as usize,
            max_request_bytes: config.rerank_max_request_bytes as usize,
        },
        ..PipelineOptions::default()
    };
    Ok(SearchEngine::new(embedder, store, reranker, options))
}
