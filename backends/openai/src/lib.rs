//! An OpenAI-compatible `/v1/embeddings` endpoint as an [`Embedder`].
//!
//! The request is the reference server's byte for byte: `{"input":[...],
//! "model":M}` (Go marshals a map, so the keys come sorted), with the API key
//! as a bearer token. The answer is held to the [`Embedder`] contract here,
//! once, so the pipeline can trust it: exactly one non-empty vector per input,
//! or the reference's error `embedding request returned no embedding`.
//!
//! The reference only ever embeds one input and ignores `index`; for a single
//! input so do we. For several inputs the vectors are put in `index` order
//! when the server gives indices (they must then name every input once), and
//! taken in response order when it gives none.

mod registry;

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Embedder};
use rr_http::json::{f32_list, null_as_default};
use rr_http::{HttpClient, HttpError, bearer};
use serde::{Deserialize, Serialize};

/// The operation name in errors and logs.
pub const OPERATION: &str = "embedding request";

/// Where the embedding model is served.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OpenAiEmbedderConfig {
    /// Origin of the API, without a trailing `/`; `/v1/embeddings` is appended.
    pub api_url: String,
    pub model: String,
    /// Sent as `Bearer <key>` (as is when it already has the scheme).
    pub api_key: Option<String>,
}

impl std::fmt::Debug for OpenAiEmbedderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedderConfig")
            .field("api_url", &self.api_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What can go wrong embedding.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddingError {
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The answer did not hold exactly one non-empty vector per input.
    #[error("embedding request returned no embedding")]
    NoEmbedding,
}

/// An OpenAI-compatible embedding endpoint.
pub struct OpenAiEmbedder {
    http: HttpClient,
    url: String,
    model: String,
    authorization: Option<String>,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder").field("url", &self.url).field("model", &self.model).finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct EmbeddingBody<'a> {
    input: &'a [String],
    model: &'a str,
}

#[derive(Debug, Default, Deserialize)]
struct EmbeddingResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    data: Vec<Option<EmbeddingItem>>,
}

#[derive(Debug, Default, Deserialize)]
struct EmbeddingItem {
    #[serde(default)]
    index: Option<i64>,
    #[serde(default, deserialize_with = "f32_list")]
    embedding: Vec<f32>,
}

impl EmbeddingResponse {
    fn into_vectors(self, inputs: usize) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let items: Vec<EmbeddingItem> = self.data.into_iter().map(Option::unwrap_or_default).collect();
        if items.len() != inputs || items.iter().any(|item| item.embedding.is_empty()) {
            return Err(EmbeddingError::NoEmbedding);
        }
        if inputs == 1 || items.iter().all(|item| item.index.is_none()) {
            return Ok(items.into_iter().map(|item| item.embedding).collect());
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; inputs];
        for item in items {
            let slot = item
                .index
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| slots.get_mut(i))
                .filter(|slot| slot.is_none())
                .ok_or(EmbeddingError::NoEmbedding)?;
            *slot = Some(item.embedding);
        }
        // Every index was in range and distinct, so every slot is filled.
        slots.into_iter().map(|slot| slot.ok_or(EmbeddingError::NoEmbedding)).collect()
    }
}

impl OpenAiEmbedder {
    /// An embedder for `config`, sending through `http`. The API key is added
    /// to the client's secrets.
    pub fn new(config: OpenAiEmbedderConfig, http: HttpClient) -> Self {
        let key = config.api_key.unwrap_or_default();
        OpenAiEmbedder {
            http: http.with_secret(&key),
            url: format!("{}/v1/embeddings", config.api_url.trim_end_matches('/')),
            model: config.model,
            authorization: bearer(&key),
        }
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Embeds `inputs` in one request, one vector per input in input order.
    pub async fn embed_all(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let body = EmbeddingBody { input: inputs, model: &self.model };
        let response: EmbeddingResponse =
            self.http.post_json(OPERATION, &self.url, &body, self.authorization.as_deref()).await?;
        response.into_vectors(inputs.len())
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        "openai"
    }

    /// The caller's `Authorization` is not forwarded: the embedding service
    /// has its own key.
    async fn embed(&self, inputs: &[String], _ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        self.embed_all(inputs).await.map_err(|e| {
            let summary = match &e {
                EmbeddingError::Http(http) => http.summary(),
                other => other.to_string(),
            };
            BackendError::new(self.name(), e).with_summary(summary)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rr_http::json;

    fn vectors(body: &str, inputs: usize) -> Result<Vec<Vec<f32>>, String> {
        let response: EmbeddingResponse = json::decode(body.as_bytes()).map_err(|e| e.to_string())?;
        response.into_vectors(inputs).map_err(|e| e.to_string())
    }

    #[test]
    fn one_input_ignores_the_index_like_the_reference() {
        assert_eq!(vectors(r#"{"data":[{"index":7,"embedding":[0.5]}]}"#, 1).unwrap(), vec![vec![0.5]]);
    }

    #[test]
    fn several_inputs_are_ordered_by_index() {
        let body = r#"{"data":[{"index":1,"embedding":[2]},{"index":0,"embedding":[1]},{"index":2,"embedding":[3]}]}"#;
        assert_eq!(vectors(body, 3).unwrap(), vec![vec![1.0], vec![2.0], vec![3.0]]);
        let unindexed = r#"{"data":[{"embedding":[2]},{"embedding":[1]}]}"#;
        assert_eq!(vectors(unindexed, 2).unwrap(), vec![vec![2.0], vec![1.0]]);
    }

    #[test]
    fn every_malformed_answer_is_no_embedding() {
        let no = Err("embedding request returned no embedding".to_owned());
        assert_eq!(vectors(r#"{"data":[]}"#, 1), no);
        assert_eq!(vectors(r#"{"data":null}"#, 1), no);
        assert_eq!(vectors(r#"null"#, 1), no);
        assert_eq!(vectors(r#"{"data":[null]}"#, 1), no);
        assert_eq!(vectors(r#"{"data":[{"embedding":[]}]}"#, 1), no);
        assert_eq!(vectors(r#"{"data":[{"embedding":null}]}"#, 1), no);
        assert_eq!(vectors(r#"{"data":[{"embedding":[1]},{"embedding":[2]}]}"#, 1), no);
        assert_eq!(vectors(r#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}"#, 2), no);
        assert_eq!(vectors(r#"{"data":[{"index":0,"embedding":[1]},{"index":2,"embedding":[2]}]}"#, 2), no);
        assert_eq!(vectors(r#"{"data":[{"index":0,"embedding":[1]},{"embedding":[2]}]}"#, 2), no);
        assert_eq!(vectors(r#"{"data":[{"index":-1,"embedding":[1]},{"index":0,"embedding":[2]}]}"#, 2), no);
    }
}
