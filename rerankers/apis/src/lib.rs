//! Rerankers for hosted rerank APIs: Cohere `/v2/rerank`, Jina and Voyage
//! `/v1/rerank`, Hugging Face text-embeddings-inference (TEI) `/rerank`.
//!
//! The four APIs answer the same question in four shapes (`results` or
//! `data`, `relevance_score` or `score`, a wrapped list or a bare array), and
//! all of them sort their answer by relevance, not by input. Each provider
//! module only builds its request body and says where its items sit; the
//! rest is written once, in [`ApiReranker`]. Putting the scores back in
//! document order, and refusing an answer that does not score every
//! document exactly once, happens in one place (`document_scores`), so the
//! four cannot differ in what they let through.
//! A partial answer is an error naming the provider, never a shorter list:
//! the pipeline would otherwise silently reorder results.
//!
//! All HTTP goes through [`rr_http::HttpClient`]: 429 and 5xx are retried
//! with backoff, each attempt has a deadline, bodies are capped and secrets
//! redacted. A non-2xx answer is reported with the provider's own message,
//! read from its error body (see `provider_message`), because the raw body
//! of a FastAPI validation error is much harder to read than its `msg`.

mod cohere;
mod endpoint;
mod error;
mod jina;
mod registry;
mod reranker;
mod tei;
mod voyage;

pub use cohere::{CohereConfig, CohereReranker, DEFAULT_COHERE_URL};
pub use endpoint::Connection;
pub use error::RerankError;
pub use jina::{DEFAULT_JINA_URL, JinaConfig, JinaReranker};
pub use reranker::ApiReranker;
pub use tei::{DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_CONCURRENT_BATCHES, TeiConfig, TeiReranker};
pub use voyage::{DEFAULT_VOYAGE_URL, VoyageConfig, VoyageReranker};
