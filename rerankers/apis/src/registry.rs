//! The `cohere`, `jina`, `voyage` and `tei` reranker kinds of the plugin
//! registry.
//!
//! Settings (`deny_unknown_fields`, so a misspelt key is an error naming it):
//!
//! - `cohere`: `model`, `api_key_env`, `api_url` (default
//!   `https://api.cohere.com`), `max_tokens_per_doc` (optional);
//! - `jina`: `model`, `api_key_env`, `api_url` (default `https://api.jina.ai`);
//! - `voyage`: `model`, `api_key_env`, `api_url` (default
//!   `https://api.voyageai.com`), `truncation` (default true);
//! - `tei`: `api_url` (required), `api_key_env` (optional), `truncate`
//!   (default true), `max_batch_size` (default 32), `max_concurrent_batches`
//!   (default 4).
//!
//! `api_key_env` names the environment variable holding the key: keys never
//! sit in the file. The hosted APIs all need one, so it is required there
//! and a missing variable is reported when the server starts rather than as
//! a 401 on the first search.

use std::sync::Arc;

use rr_core::Reranker;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::{
    CohereConfig, CohereReranker, Connection, DEFAULT_COHERE_URL, DEFAULT_JINA_URL, DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_CONCURRENT_BATCHES, DEFAULT_VOYAGE_URL, JinaConfig, JinaReranker, TeiConfig, TeiReranker, VoyageConfig,
    VoyageReranker,
};

/// Refuses what cannot be a URL now, rather than at the first search.
fn checked_url(api_url: String) -> Result<String, FactoryError> {
    let scheme_ok =
        ["http://", "https://"].iter().any(|s| api_url.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s)));
    if scheme_ok && api_url.len() > api_url.find("://").map_or(0, |i| i + 3) {
        Ok(api_url)
    } else {
        Err(FactoryError::new(format!("api_url: expected an http:// or https:// URL, got {api_url:?}")))
    }
}

/// A hosted API's connection: its URL and the key it requires.
fn hosted(api_url: String, api_key_env: &str, ctx: &FactoryContext) -> Result<Connection, FactoryError> {
    Ok(Connection { api_url: checked_url(api_url)?, api_key: Some(ctx.secret("api_key_env", api_key_env)?) })
}

fn at_least_one(key: &str, value: usize) -> Result<usize, FactoryError> {
    if value == 0 { Err(FactoryError::new(format!("{key}: must be at least 1"))) } else { Ok(value) }
}

fn cohere_url() -> String {
    DEFAULT_COHERE_URL.to_owned()
}
fn jina_url() -> String {
    DEFAULT_JINA_URL.to_owned()
}
fn voyage_url() -> String {
    DEFAULT_VOYAGE_URL.to_owned()
}
fn yes() -> bool {
    true
}
fn max_batch_size() -> usize {
    DEFAULT_MAX_BATCH_SIZE
}
fn max_concurrent_batches() -> usize {
    DEFAULT_MAX_CONCURRENT_BATCHES
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CohereSettings {
    model: String,
    api_key_env: String,
    #[serde(default = "cohere_url")]
    api_url: String,
    #[serde(default)]
    max_tokens_per_doc: Option<u32>,
}

fn create_cohere(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let s: CohereSettings = FactoryError::parse(config)?;
    if s.max_tokens_per_doc == Some(0) {
        return Err(FactoryError::new("max_tokens_per_doc: must be at least 1"));
    }
    let connection = hosted(s.api_url, &s.api_key_env, ctx)?;
    let config = CohereConfig { connection, model: s.model, max_tokens_per_doc: s.max_tokens_per_doc };
    Ok(Arc::new(CohereReranker::new(config, rr_http::client_for(ctx)?)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JinaSettings {
    model: String,
    api_key_env: String,
    #[serde(default = "jina_url")]
    api_url: String,
}

fn create_jina(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let s: JinaSettings = FactoryError::parse(config)?;
    let connection = hosted(s.api_url, &s.api_key_env, ctx)?;
    Ok(Arc::new(JinaReranker::new(JinaConfig { connection, model: s.model }, rr_http::client_for(ctx)?)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VoyageSettings {
    model: String,
    api_key_env: String,
    #[serde(default = "voyage_url")]
    api_url: String,
    #[serde(default = "yes")]
    truncation: bool,
}

fn create_voyage(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let s: VoyageSettings = FactoryError::parse(config)?;
    let connection = hosted(s.api_url, &s.api_key_env, ctx)?;
    let config = VoyageConfig { connection, model: s.model, truncation: s.truncation };
    Ok(Arc::new(VoyageReranker::new(config, rr_http::client_for(ctx)?)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TeiSettings {
    api_url: String,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default = "yes")]
    truncate: bool,
    #[serde(default = "max_batch_size")]
    max_batch_size: usize,
    #[serde(default = "max_concurrent_batches")]
    max_concurrent_batches: usize,
}

fn create_tei(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let s: TeiSettings = FactoryError::parse(config)?;
    let connection = Connection {
        api_url: checked_url(s.api_url)?,
        api_key: ctx.optional_secret("api_key_env", s.api_key_env.as_deref())?,
    };
    let config = TeiConfig {
        connection,
        truncate: s.truncate,
        max_batch_size: at_least_one("max_batch_size", s.max_batch_size)?,
        max_concurrent_batches: at_least_one("max_concurrent_batches", s.max_concurrent_batches)?,
    };
    Ok(Arc::new(TeiReranker::new(config, rr_http::client_for(ctx)?)))
}

rr_core::register_plugin!(reranker "cohere", create_cohere);
rr_core::register_plugin!(reranker "jina", create_jina);
rr_core::register_plugin!(reranker "voyage", create_voyage);
rr_core::register_plugin!(reranker "tei", create_tei);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_when_the_reranker_is_built() {
        assert_eq!(checked_url("https://api.cohere.com".into()).unwrap(), "https://api.cohere.com");
        assert_eq!(checked_url("HTTP://tei:8080".into()).unwrap(), "HTTP://tei:8080");
        for bad in ["", "api.cohere.com", "https://", "ftp://x", "localhost:8080"] {
            assert_eq!(
                checked_url(bad.into()).unwrap_err().to_string(),
                format!("api_url: expected an http:// or https:// URL, got {bad:?}")
            );
        }
    }
}
