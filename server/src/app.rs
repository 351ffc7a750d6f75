//! Builds the search engine a drop-in configuration describes: the Chroma
//! store, the OpenAI-compatible embedder and reranker, from the typed
//! configuration (its secrets never leave it).

use std::sync::Arc;

use rr_chroma::{ChromaConfig, ChromaStore};
use rr_core::{RerankOptions, Reranker, SearchEngine};
use rr_engine::retrieval::EngineSettings;
use rr_http::{HttpClient, HttpError, HttpSettings};
use rr_openai::{OpenAiEmbedder, OpenAiEmbedderConfig};
use rr_rerank_openai::{OpenAiReranker, OpenAiRerankerConfig};

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

/// The engine over the configured Chroma collection with the lexical index
/// at `dir` beside it ([`rr_engine::beside`]): hybrid retrieval, the head
/// read again and the code ranking, queries embedded by the index's
/// embedder; the configuration's reranker, if any, reorders the candidates.
pub fn build_engine_beside(config: &Config, dir: &std::path::Path) -> Result<SearchEngine, String> {
    let http = http_client(config).map_err(|e| e.to_string())?;
    let reranker = reranker(config, &http);
    let store = Arc::new(chroma_store(config, http));
    rr_engine::local::engine_beside(store, dir, reranker).map_err(|e| e.to_string())
}

/// Brings the lexical index at `dir` level with the configured collection
/// ([`rr_engine::copied::refresh`]) before serving, first creating it for a
/// collection another indexer filled (its vectors from the configured
/// endpoint), then again every `every` in the background (never when zero).
/// A failed refresh while serving is logged and retried at the next one:
/// the index keeps answering with what it holds.
pub async fn keep_lexical_index(
    config: &Config,
    dir: &std::path::Path,
    every: std::time::Duration,
) -> Result<(), String> {
    let endpoint = rr_engine::local::EmbeddingEndpoint {
        api_url: config.embedding_api_url.clone(),
        model: config.embedding_model.clone(),
    };
    let refused = |e: rr_engine::local::LocalError| match e {
        rr_engine::local::LocalError::Chroma(e) => format!("cannot read the Chroma collection: {}", e.summary()),
        other => other.to_string(),
    };
    let store = chroma_store(config, http_client(config).map_err(|e| e.to_string())?);
    // Nothing is created for a collection that is not there.
    if store.find_collection().await.map_err(|e| refused(e.into()))?.is_none() {
        return Err(rr_engine::local::LocalError::NoCollection(config.collection_name.clone()).to_string());
    }
    if let Some(held) = store.collection_dimension().await.map_err(|e| refused(e.into()))? {
        rr_engine::copied::check_dimension(dir, &config.collection_name, held).map_err(refused)?;
    }
    if rr_engine::copied::create_for_collection(dir, endpoint).map_err(refused)? {
        tracing::info!(index = %dir.display(), "lexical index: created for the collection");
    }
    let done = rr_engine::copied::refresh(&store, dir).await.map_err(refused)?;
    tracing::info!(
        added = done.added,
        removed = done.removed,
        held = done.held,
        "lexical index: level with the collection"
    );
    if every.is_zero() {
        return Ok(());
    }
    let dir = dir.to_owned();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match rr_engine::copied::refresh(&store, &dir).await {
                Ok(done) if done.added + done.removed > 0 => tracing::info!(
                    added = done.added,
                    removed = done.removed,
                    held = done.held,
                    "lexical index: level with the collection"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %refused(e), "lexical index: refresh failed; kept as it was"),
            }
        }
    });
    Ok(())
}

/// The configured OpenAI-compatible reranker, if reranking is on.
fn reranker(config: &Config, http: &HttpClient) -> Option<Arc<dyn Reranker>> {
    config.reranking_enabled().then(|| {
        let reranker = OpenAiReranker::new(
            OpenAiRerankerConfig {
                api_url: config.rerank_api_url.clone(),
                model: config.rerank_model.clone(),
                api_key: non_empty(&config.rerank_api_key),
            },
            http.clone(),
        );
        Arc::new(reranker) as Arc<dyn Reranker>
    })
}

/// The drop-in's engine: the configured Chroma collection, the
/// OpenAI-compatible embedder and, when configured, the OpenAI-compatible
/// reranker, on one HTTP client (the configured attempts and timeout, every
/// secret redacted).
pub fn build_engine(config: &Config) -> Result<SearchEngine, String> {
    let http = http_client(config).map_err(|e| e.to_string())?;
    let embedder = OpenAiEmbedder::new(
        OpenAiEmbedderConfig {
            api_url: config.embedding_api_url.clone(),
            model: config.embedding_model.clone(),
            api_key: non_empty(&config.embedding_api_key),
        },
        http.clone(),
    );
    let reranker = reranker(config, &http);
    let settings = EngineSettings {
        rerank: RerankOptions {
            candidate_multiplier: config.rerank_candidate_multiplier as usize,
            max_candidates: config.rerank_max_candidates as usize,
            max_document_bytes: config.rerank_max_document_bytes as usize,
            max_request_bytes: config.rerank_max_request_bytes as usize,
        },
        ..EngineSettings::default()
    };
    let store = Arc::new(chroma_store(config, http));
    rr_engine::retrieval::engine(store, Arc::new(embedder), reranker, &settings, str::to_owned)
        .map_err(|e| e.to_string())
}
